"""In-place ops on global tensors while ``nn.Graph`` traces ``build`` (``x += y``,
``nn.ReLU(inplace=True)``, ``t[idx] = v``, ``masked_fill_``, a buffer's ``add_``...).

As in a one-process trace (``LazyInterpreter._write_in_place``), an in-place call becomes the op
out of place and the written tensor is rebound to its result; eager state (a parameter or
buffer, or the variable a proxy hands out for it) is also written back with an ``assign`` op.
The op runs through the lazy-global interpreter like any other call, with a signature that
keeps the written tensor's sbp if the op's rule has one; if none does (e.g. an op without an
SBP rule writing into a split tensor runs broadcast), the result is boxed back to the written
tensor's sbp, so an in-place op never changes a tensor's layout (as eagerly and in OneFlow).
Autograd records the op on the written tensors' pre-op identities, as the eager-global
interpreter does (``global_tensor.GlobalInterpreter``): the gradient flows to the old value.
"""
from __future__ import annotations

import functools

from actorflow.autograd import grad_mode
from actorflow.dispatch.common import check_inplace, infer
from actorflow.framework.sbp_parallel import nd_attrs
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.ops import registry
from actorflow.tensor import Tensor


def _to_layout(interp, r: Tensor, t: Tensor, op_name: str) -> Tensor:
    """Result ``r`` as ``t`` is laid out and typed (the value ``t`` takes)."""
    from actorflow.dispatch.lazy_global import LazyGlobalBlob
    from actorflow.dispatch import apply  # late: dispatch.apply imports this module

    want = nd_attrs(t.sbp)
    if r._h.name is None:  # another stage's op: no blob here either way
        h = LazyGlobalBlob(interp.tracer, None, r._h.placement,
                           tuple(SbpParallel.from_attr(a) for a in want))
        return Tensor._from_handle(h, tuple(t._shape), t.dtype)
    if r.dtype is not t.dtype:
        with grad_mode.no_grad():
            r = apply(registry.get("cast"), [r], {"dtype": t.dtype})[0]
    if nd_attrs(r._h.sbp) != want:
        r = interp.box_to(r, want, f"{op_name}_ keeps the sbp of the tensor it writes")
    return r


def _assign(interp, eager: Tensor, value: Tensor) -> Tensor:
    """Write global lazy ``value`` into eager state ``eager`` at run time (global, laid out as
    ``value``; or local, e.g. a GradScaler's scale: ``value`` is then broadcast); the lazy
    tensor later reads of ``eager`` in this trace see."""
    from actorflow.dispatch.lazy_global import global_tags

    tr = interp.tracer
    var = tr.variable(eager)
    if var._h.name is None:  # another stage's state: nothing to write on this rank
        cache = tr.__dict__.setdefault("_absent", {})
        fresh = Tensor._from_handle(value._h, tuple(eager._shape), eager.dtype)
        fresh.requires_grad = value.requires_grad
        cache[id(eager)] = (eager, fresh)
        return fresh
    start = len(tr.job.ops)
    tr._assign(eager, value)
    sbp = nd_attrs(value._h.sbp)
    for conf in tr.job.ops[start:]:
        conf.tags["global"] = global_tags(value._h.placement, (sbp, sbp), (), [])
    return tr.lazy_of(eager)


def write_in_place(interp, op, inputs: list, attrs: dict, out: list, record_: bool):
    """``(results, node inputs, node outputs)`` of an in-place call on global tensors in a
    trace (see the module docstring); ``interp``: the ``LazyGlobalInterpreter``."""
    tr = interp.tracer
    pl = interp._placement(op, list(inputs) + list(out))
    gins = [interp.as_global(op, t, pl) for t in inputs]
    gout = [interp.as_global(op, t, pl) for t in out]
    check_inplace(op, inputs, out, infer(op, gins, attrs), record_)
    saved = gins
    if record_:
        saved = [tr.old_identity(g) if any(g is o for o in gout) else g for g in gins]
    results = interp._run(op, gins, attrs, pl, gout)
    # (eager state used directly: a local one counts as broadcast)
    assign = functools.partial(_assign, interp)
    written = [tr.rebind(t, _to_layout(interp, r, g, op.name), assign)
               for t, g, r in zip(out, gout, results)]
    return list(out), saved, written


__all__ = ["write_in_place"]
