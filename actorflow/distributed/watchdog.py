"""No wait between ranks is unbounded.

With plain MPI a rank blocked in a collective waits forever when a peer died, raised, or issued
a different collective. Two guards, installed when the program runs on several processes:

* ``guarded(op, detail)``: a context around each blocking MPI call. A watchdog thread checks
  the call's age; past ``ACTORFLOW_COMM_TIMEOUT`` seconds (default 300) it prints which op, rank
  and shapes were stuck and aborts the MPI job, so every rank exits non-zero. ``slot()`` is the
  same guard without a context or a clock read per call, for the hot path of small
  collectives (``flow.comm.all_reduce``): the watchdog dates a call from when it first sees it.
* an exception hook: an uncaught exception on any rank is printed with the rank, then the job
  is aborted (MPI would otherwise wait in finalisation for ranks that will never come).
* failure notices: a rank whose graph call failed (``notify_failure``) sends the error's first
  line to every other rank on a communicator of its own; the watchdog thread polls for notices
  and, when a blocking call of this rank was already pending as the notice came, aborts the job
  at once naming the failing rank and op, instead of waiting for the timeout. (It cannot make
  the blocked MPI call raise; a call started after the notice is left to complete.)
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import time

from actorflow.settings import env_int

TIMEOUT_VAR = "ACTORFLOW_COMM_TIMEOUT"
# thread ident -> (op, detail, start time); a dict item set or popped is atomic under the GIL,
# and the watchdog reads a snapshot, so the guarded calls need no lock
_calls: dict = {}
_world = None
_notice_comm = None      # a duplicate of the world communicator, only for failure notices
_sent: list = []         # the notices' send requests (kept until they complete)
NOTICE_TAG = 31337


def timeout() -> float:
    """Seconds a blocking call between ranks may take (``ACTORFLOW_COMM_TIMEOUT``)."""
    return float(env_int(TIMEOUT_VAR, 300, minimum=1))


class guarded:
    """Context: the blocking MPI call made inside is watched (see the module docstring).
    ``detail`` (the shapes) may be a callable, called only if the call is reported."""

    __slots__ = ("op", "detail")

    def __init__(self, op: str, detail: str = ""):
        self.op, self.detail = op, detail

    def __enter__(self):
        _calls[threading.get_ident()] = (self.op, self.detail, time.monotonic())

    def __exit__(self, *exc):
        _calls.pop(threading.get_ident(), None)
        return False


class Slot:
    """A thread's cheap guard (``slot()``): ``enter(op, detail, arg)`` before a blocking MPI
    call, ``leave()`` after it (not nested). ``detail`` is the text naming the shapes, or a
    callable giving it (called with ``arg`` when not None), called only if the call is
    reported. The watchdog dates a call from the first time it sees it pending (at most one
    poll, 0.2 s, late), so entering reads no clock and allocates nothing."""

    __slots__ = ("seq", "op", "detail", "arg")

    def __init__(self):
        self.seq = 0   # odd while a call is pending; each enter and leave adds one
        self.op = self.detail = self.arg = None

    def enter(self, op: str, detail, arg=None) -> None:
        self.op, self.detail, self.arg = op, detail, arg
        self.seq += 1

    def leave(self) -> None:
        self.seq += 1
        self.arg = None  # after seq: a watchdog reading None here sees seq changed


_slots: dict = {}            # thread ident -> its Slot
_local = threading.local()
_seen: dict = {}             # thread ident -> (seq, first time the watchdog saw it pending)


def slot() -> Slot:
    """This thread's ``Slot`` (made on first use)."""
    try:
        return _local.slot
    except AttributeError:
        s = _local.slot = _slots[threading.get_ident()] = Slot()
        return s


def _pending(now: float) -> list:
    """(op, detail, start time) of every guarded call pending now."""
    out = list(_calls.values())
    for ident, s in list(_slots.items()):
        seq = s.seq
        if seq & 1:
            op, detail, arg = s.op, s.detail, s.arg
            if arg is not None:
                detail = functools.partial(detail, arg)
            if s.seq != seq:  # it left (and maybe entered another call) meanwhile
                continue
            first = _seen.get(ident)
            if first is None or first[0] != seq:
                first = _seen[ident] = (seq, now)
            out.append((op, detail, first[1]))
    return out


def abort(message: str, code: int = 1) -> None:
    """Print ``message`` naming this rank and end every rank of the job."""
    rank = _world.rank if _world is not None else 0
    sys.stderr.write(f"[actorflow rank {rank}] {message}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # MPI_Abort makes the launcher kill every process at once; its forwarding of this rank's
    # output can lose what was just written unless the launcher gets a moment to read it
    time.sleep(0.5)
    comm = _world.comm if _world is not None else None
    if comm is not None:
        comm.Abort(code)
    os._exit(code)


def notify_failure(message: str) -> None:
    """Tell every other rank that this rank failed (``message``: what failed); see the module
    docstring. Does nothing in one process."""
    comm = _notice_comm
    if comm is None:
        return
    text = f"rank {_world.rank} failed: {message}"
    for peer in range(comm.Get_size()):
        if peer != comm.Get_rank():
            _sent.append(comm.isend(text, dest=peer, tag=NOTICE_TAG))


def _notice_abort() -> None:
    """Abort if another rank's failure notice came while a blocking call here was pending."""
    from mpi4py import MPI

    status = MPI.Status()
    while _notice_comm.iprobe(source=MPI.ANY_SOURCE, tag=NOTICE_TAG, status=status):
        text = _notice_comm.recv(source=status.Get_source(), tag=NOTICE_TAG)
        arrived = time.monotonic()
        waiting = [(op, d) for op, d, t0 in _pending(arrived) if t0 <= arrived]
        if waiting:
            op, detail = waiting[0]
            detail = detail() if callable(detail) else detail
            abort(f"{op}{' ' + detail if detail else ''} abandoned: {text}; aborting every "
                  "rank")


def _watch() -> None:
    while True:
        time.sleep(0.2)
        if _notice_comm is not None:
            _notice_abort()
        limit = timeout()
        now = time.monotonic()
        stuck = [(op, d, now - t0) for op, d, t0 in _pending(now) if now - t0 > limit]
        if stuck:
            op, detail, age = stuck[0]
            detail = detail() if callable(detail) else detail
            abort(f"{op}{' ' + detail if detail else ''} did not complete in {age:.1f} s "
                  f"({TIMEOUT_VAR}={limit:g}): another rank failed, exited or issued a "
                  f"different collective; aborting every rank")


def _excepthook(kind, value, tb) -> None:
    import traceback

    text = "".join(traceback.format_exception(kind, value, tb))
    abort(f"uncaught exception; aborting every rank:\n{text.rstrip()}")


def install(world) -> None:
    """Start the watchdog thread and the exception hook for ``world`` (several ranks)."""
    global _world, _notice_comm
    _world = world
    _notice_comm = world.comm.Dup()   # every rank installs at import, so the Dup lines up
    threading.Thread(target=_watch, name="actorflow-comm-watchdog", daemon=True).start()
    sys.excepthook = _excepthook
