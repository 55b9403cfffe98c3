"""Which kernel errors the user has not been told about yet, and raising them once.

A failed instruction's ``KernelError`` belongs to what it poisoned: the outputs it was to
create (reading them raises it, every time: they hold no values) and the memory it was to
write in place (``Storage.failed``: the next read raises it, once, then the memory is usable
with its previous values). Raising it anywhere counts as telling the user; an error raised
once is not raised again at unrelated sync points.

Errors whose results nobody reads are reported by ``synchronize()`` once, all together (the
oldest raised, the count of the others in a note), or printed at interpreter exit. Only the
first ``KEEP`` unreported errors are kept: a loop of failing ops nobody reads holds no more
than that, whatever its length.
"""
from __future__ import annotations

import copy as _copy

from actorflow.errors import KernelError

KEEP = 16

_listed: list = []     # the oldest unreported errors, at most KEEP, oldest first
_recorded = 0          # errors recorded so far (each gets its number as ``vm_seq``)
_cleared = 0           # errors numbered up to this one were all reported by synchronize()
_reported_since = 0    # errors numbered above _cleared that were raised since


def record(err: BaseException) -> None:
    """Note ``err`` as a new unreported failure."""
    global _recorded
    _recorded += 1
    err.vm_seq = _recorded
    if len(_listed) < KEEP:
        _listed.append(err)


def is_unreported(err: BaseException) -> bool:
    """True while ``err`` (a recorded failure) has not been raised or summarised."""
    return getattr(err, "vm_seq", 0) > _cleared and not getattr(err, "vm_reported", False)


def mark_reported(err: BaseException) -> None:
    global _reported_since
    if is_unreported(err):
        _reported_since += 1
    err.vm_reported = True
    try:
        _listed.remove(err)
    except ValueError:
        pass


def unreported_count() -> int:
    """How many recorded failures have not been reported."""
    return _recorded - _cleared - _reported_since


def unreported() -> list:
    """The oldest unreported failures (at most ``KEEP``)."""
    return [e for e in _listed if is_unreported(e)]


def raise_error(err: BaseException):
    """Raise a copy of ``err`` (marked reported): ``err`` stays on its instruction (later
    readers of a failed result raise it too), and the traceback of where it was reported would
    keep those frames' locals (the caller's tensors) alive as long as the instruction is
    remembered."""
    mark_reported(err)
    raised = _copy.copy(err)  # message, notes and attributes; no traceback
    raised.__cause__ = err.__cause__
    try:
        raise raised
    finally:
        del raised  # this frame is in the copy's traceback: no cycle through its locals


def raise_all() -> None:
    """Report every unreported failure at once (``synchronize()``): raise the oldest, with
    the count of the others; afterwards none is pending and none is kept."""
    global _cleared, _reported_since
    n = unreported_count()
    if n <= 0:
        return
    errs = unreported()
    _cleared, _reported_since = _recorded, 0
    _listed.clear()
    if not errs:  # the kept ones were all read since: the others were only counted
        raise KernelError(f"{n} VM instruction(s) failed and their results were not read")
    first = errs[0]
    first.vm_reported = True
    raised = _copy.copy(first)
    raised.__cause__ = first.__cause__
    raised.__notes__ = list(getattr(first, "__notes__", ()))
    if n > 1:
        raised.add_note(f"({n - 1} other failed instruction(s) whose results were not read "
                        f"are reported with this one: synchronize() raises once)")
    try:
        raise raised
    finally:
        del raised

