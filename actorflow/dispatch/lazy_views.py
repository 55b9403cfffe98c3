"""Writes through views while ``nn.Graph`` traces ``build`` (functionalization of views).

Eagerly a view (``y[:, 0]``, ``y.view(..)``, ``y.transpose(..)``, ``narrow``, ``split``,
``diagonal``...) shares its base's memory, so ``y[:, 0].mul_(2)`` changes ``y``. A trace has no
shared memory: an in-place call is its op out of place and the written tensor is rebound to
the result (``LazyInterpreter._write_in_place``). This module keeps the eager meaning:

* every view op traced (an op with a ``view`` function) is noted: the view tensor, its base
  (the tensor object it was made of, itself possibly a view), the op, its attrs, and the
  base's handle it was made from;
* after an in-place call writes a noted view, the new view value is written back into its
  base out of place by the view op's own ``view_write`` (``setitem`` for getitem / narrow /
  split, the inverse reshape or permutation, a masked select for diagonal) and the base
  takes the result with ``copy_``,
  itself an in-place call: a view of a view writes back along the chain, and a base that is
  eager state (a parameter, a buffer) is assigned at run time as any in-place write is;
* ``detach()`` / ``.data`` of a tensor is noted as an alias (``note_alias``): a write into the
  alias is copied into its base without autograd (as eagerly: shared storage, history
  unchanged), and the alias always reads the base's current value;
* a noted view whose base has since been written (through it, through another view, or
  directly) is made again from the base's new value before its next use in an op or as an
  output (``refresh``); its version counter moves, so a gradient rule that saved the old value
  reports the change as eagerly.

Autograd follows the out-of-place ops, so gradients through the written base are those of
eager (PyTorch) semantics. A view the trace can't write back (``expand``: many view elements
share one base element) raises an error naming the op and the module path.
"""
from __future__ import annotations

import functools

from actorflow.autograd import grad_mode
from actorflow.job.views import aliasing_views, stride_probe
from actorflow.dispatch.common import note_view_mode, where


class _ViewNote:
    """What the trace knows of one view (or detached alias) ``t``: its ``base`` (the tensor
    object it was made of, itself possibly a view), the view ``op`` (None: an alias) with its
    ``attrs`` and output index ``idx``, the base's handle ``seen`` it was last made from, the
    grad mode it was made in, and its stride ``probe`` (where it lies in memory, for views of
    it). Kept in ``LazyInterpreter.views`` by ``id(t)``."""

    __slots__ = ("t", "base", "op", "attrs", "idx", "seen", "enabled", "probe")

    def __init__(self, t, base, op, attrs: dict, idx: int, seen, enabled: bool, probe):
        self.t, self.base, self.op, self.attrs, self.idx = t, base, op, attrs, idx
        self.seen, self.enabled, self.probe = seen, enabled, probe


def _note(tracer, t) -> _ViewNote | None:
    """``t``'s note, if ``t`` is a noted view (ids are reused: the tensor must match)."""
    note = tracer.views.get(id(t))
    return note if note is not None and note.t is t else None


def _probe_of(tracer, base):
    """Where ``base`` lies in memory: its own probe if it is a noted view, else a fresh one."""
    note = _note(tracer, base)
    return note.probe if note is not None else stride_probe(tuple(base._shape))


def _handle_of(tracer, base):
    """The handle that holds ``base``'s current value in the trace."""
    if getattr(base._h, "tracer", None) is tracer:
        return base._h
    hit = tracer._lazy_of_eager.get(id(base))
    return hit[1]._h if hit is not None and hit[0] is base else None


def note_view(tracer, op, inputs: list, attrs: dict, results: list) -> None:
    """Record the view tensors ``results`` that ``op`` made of ``inputs[0]`` (views that eager
    mode would make as copies are not views)."""
    if tracer.regenerating or len(inputs) != 1:
        return
    base = inputs[0]
    probes = aliasing_views(op, [_probe_of(tracer, base)], attrs)
    if probes is None:
        return
    note_view_mode(base, base, results)
    seen = _handle_of(tracer, base)
    enabled = grad_mode._state.enabled
    for i, t in enumerate(results):
        tracer.views[id(t)] = _ViewNote(t, base, op, dict(attrs), i, seen, enabled, probes[i])


def note_alias(tracer, base, alias) -> None:
    """Record that ``alias`` is ``base.detach()`` (or ``base.data``): the same values outside
    autograd, so an in-place write into either is seen by the other, as eagerly (shared
    storage). Noted with op None; the alias takes the base's lazy value at its first use."""
    if tracer.regenerating:
        return
    # (an alias of a view lies in memory where the view does)
    tracer.views[id(alias)] = _ViewNote(alias, base, None, {}, 0, None,
                                        grad_mode._state.enabled, _probe_of(tracer, base))


def note_become(tracer, t, r) -> None:
    """``t`` is about to become ``r`` (``squeeze_``, ``unsqueeze_``, ``contiguous_``: OneFlow's
    in-place shape methods). Eagerly ``t`` keeps its memory, so: ``t``'s old identity goes on
    as ``old`` (the view of ``t``'s base it was, if any, and the base of ``t``'s other views);
    ``t`` is noted as ``r`` was, a view of ``old``, or as nothing when ``r`` is a copy."""
    reg = tracer.views
    mine, theirs = _note(tracer, t), _note(tracer, r)
    theirs = theirs if theirs is not None and theirs.base is t else None
    old = tracer.old_identity(t, alias=True)
    old._vc = t._vc
    for note in list(reg.values()):
        if note.base is t:  # t's views now view its old identity (the same memory)
            note.base = old
    if mine is not None:
        reg.pop(id(t))
        mine.t = old
        reg[id(old)] = mine
    if theirs is not None:
        reg.pop(id(r))
        theirs.t = t
        reg[id(t)] = theirs


def refresh_all(tracer, inputs: list, out: list | None) -> None:
    """Before an op call: every noted view among its inputs and written tensors whose base
    was written since is made again (``refresh``)."""
    for t in inputs:
        refresh(tracer, t)
    for t in out or ():
        refresh(tracer, t)


def after_step(tracer, op, inputs: list, attrs: dict, out: list | None, results: list):
    """What a lazy interpreter hands ``dispatch.apply`` to run once the op's autograd node is
    recorded: an in-place call's write-back into the bases of the views it wrote
    (``after_write``), or a view op's note of its views (``note_view``); None otherwise."""
    if out is not None:
        return functools.partial(after_write, tracer, op, out)
    if op.view_fn is not None:
        return functools.partial(note_view, tracer, op, inputs, attrs, results)
    return None


def _refresh_alias(tracer, note: _ViewNote) -> None:
    """The alias takes its base's value if the base was written since they last agreed (a
    write into the alias itself is copied into the base by ``after_write``)."""
    now = _handle_of(tracer, note.base)
    if now is None:  # eager state or an eager tensor not read in this trace yet
        now = tracer.lazy_of(note.base)._h
    if now is not note.seen:
        note.t._h = now
        note.seen = now


def refresh(tracer, t) -> None:
    """Make view ``t`` again from its base's current value if the base was written since."""
    note = _note(tracer, t)
    if note is None:
        return
    refresh(tracer, note.base)
    if note.op is None:
        _refresh_alias(tracer, note)
        return
    now = _handle_of(tracer, note.base)
    if now is note.seen:
        return
    # late: dispatch.apply imports the interpreters that call this module
    from actorflow.dispatch import apply

    tracer.regenerating = True
    try:
        with grad_mode.set_grad_enabled(note.enabled):
            fresh = apply(note.op, [note.base], note.attrs)[note.idx]
    finally:
        tracer.regenerating = False
    t._h = fresh._h
    t.requires_grad = fresh.requires_grad
    t.grad_fn, t._out_idx = fresh.grad_fn, fresh._out_idx
    t._vc[0] += 1  # a gradient rule that saved the old value must not read the new one
    note.seen = now


def after_write(tracer, op, out: list) -> None:
    """In-place ``op`` wrote ``out``: write the written views back into their bases."""
    for t in out:
        note = _note(tracer, t)
        if note is None:
            continue
        base = note.base
        refresh(tracer, base)
        if note.op is None:  # a detached alias: the base takes the value, autograd unaware
            with grad_mode.no_grad():
                base.copy_(t)
            note.seen = _handle_of(tracer, base)
            t._h = note.seen
            continue
        # the base's value before the write, as a tensor of its own: the write-back's gradient
        # rules may save it, and ``base`` itself is rebound below
        old = tracer.old_identity(tracer.lazy_of(base))
        new_base = _written_back(op, note.op, note.attrs, note.idx, old, t)
        base.copy_(new_base)  # an in-place call itself: chains, eager state, autograd
        note.seen = _handle_of(tracer, base)


def _written_back(writer, op, attrs: dict, idx: int, base, view):
    """``base`` with ``view``'s elements replaced by the values of ``view`` (out of place), by
    the view op's own write-back (``Op.view_write_fn``)."""
    if op.view_write_fn is None:
        raise RuntimeError(where(
            f"{writer.name}_: nn.Graph can't write through a view made by {op.name!r} (an "
            f"in-place write into it would have to reach the base tensor of shape "
            f"{tuple(base._shape)}, but {op.name} views can't be written back); clone() the "
            f"view before writing into it", [base]))
    return op.view_write_fn(base, view, attrs, idx)


__all__ = ["note_view", "note_alias", "note_become", "refresh", "refresh_all", "after_write",
           "after_step"]
