"""Eager global tensors (1-D SBP): the handle, boxing, and the eager-global interpreter.

A global tensor is a ``Tensor`` whose handle is a ``GlobalBlob``: placement, SBP (a tuple of
one ``SbpParallel``) and this rank's shard, an ordinary eager tensor (None on ranks outside the
placement). The Tensor's ``_shape`` and ``dtype`` are the logical ones.

``GlobalInterpreter`` (chosen by ``dispatch.apply`` when an input is global) runs one op call:
it infers the logical outputs with the op's own inference, asks the op's SBP rule
(``op.sbp_fn``, see ``actorflow.ops.boxing``) for signatures, adds the all-broadcast one (any
op runs replicated), keeps those an in-place or mutating call allows, picks the one that moves
the fewest bytes, boxes the shards with the boxing ops, runs the eager-local interpreter on the
shards (the same kernels) and wraps the outputs. Autograd records once, in ``dispatch.apply``,
on the global tensors, so gradients of global tensors are global.

Boxing of a shard issues the boxing ops on the VM's communication worker; metadata the ranks
must agree on at call time (shard sizes of ``to_global`` from local tensors, seeds of random
ops) travels over the control communicator on the caller's thread.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from actorflow import vm
from actorflow.autograd import grad_mode
from actorflow.dispatch.common import check_inplace, infer, record
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.distributed import groups
from actorflow.distributed.world import world
from actorflow.framework.placement import SbpParallel, as_sbp_tuple, placement
from actorflow.ops import boxing, registry
from actorflow.ops.boxing import B, P, Sig, shard_range, shard_shape
from actorflow.random import default_generator
from actorflow.tensor import Tensor

_EAGER = EagerInterpreter()


class GlobalBlob:
    """Handle of a global tensor: placement, sbp, this rank's shard (``local``, or None
    outside the placement), and the logical shape and dtype. ``get()`` gathers the logical
    values (every rank must call it, as every rank of the placement takes part)."""

    __slots__ = ("placement", "sbp", "local", "shape", "dtype")
    is_global = True
    is_lazy = False

    def __init__(self, placement_, sbp: tuple, local, shape: tuple, dtype):
        self.placement, self.sbp, self.local = placement_, sbp, local
        self.shape, self.dtype = tuple(shape), dtype

    def get(self) -> np.ndarray:
        pl = self.placement
        idx = pl.index(world().rank)
        arr = None
        if idx is not None:
            full = box_shard(self.local, self.sbp[0].attr(), B, self.shape, pl, idx)
            arr = np.array(full._array())
        if pl.flat_ranks != tuple(range(world().size)):
            arr = groups.bcast_object(arr, pl.flat_ranks[0], "global tensor values")
        return arr

    def describe(self) -> str:
        return f"global on {self.placement}, sbp={self.sbp}"


def is_global(t) -> bool:
    """Whether ``t`` is a global tensor."""
    return type(getattr(t, "_h", None)) is GlobalBlob


def wrap(local, placement_: placement, sbp: tuple, shape: tuple, dtype) -> Tensor:
    """A global tensor over this rank's shard ``local`` (no transfer, no autograd)."""
    return Tensor._from_handle(GlobalBlob(placement_, sbp, local, shape, dtype), tuple(shape),
                               dtype)


def check_1d(what: str, placement_: placement) -> None:
    """Ops support 1-D placements only."""
    if len(placement_.hierarchy) != 1:
        raise ValueError(f"{what}: placement {placement_} has hierarchy "
                         f"{placement_.hierarchy}; 2-D SBP is not supported yet (use a 1-D "
                         f"list of ranks)")


def _world_ranks() -> tuple:
    return tuple(range(world().size))


# ---- boxing of one shard ------------------------------------------------------------------------

def _box_op(name: str, local: Tensor, attrs: dict, comm: bool, interp=None,
            extra: dict | None = None) -> Tensor:
    op = registry.get(name)
    if interp is not None:  # a Graph tracing: the boxing op goes into its Job
        return interp.apply(op, [local], dict(attrs, **(extra or {})), None, False)[0][0]
    if comm:
        vm.push_worker(vm.pool().comm)
    try:
        return _EAGER.apply(op, [local], attrs, None, False)[0][0]
    finally:
        if comm:
            vm.pop_worker()


def box_shard(local, src: tuple, dst: tuple, shape: tuple, pl: placement, idx: int,
              interp=None, extra: dict | None = None):
    """This rank's shard of a logical tensor of ``shape`` laid out as ``src``, re-laid out as
    ``dst`` (SBP attr tuples) through the boxing ops; ``local`` itself when they are equal.
    ``interp``: the interpreter to call them with (a Graph's tracer; default: issued eagerly),
    ``extra``: attrs added to each (a graph's communicator)."""
    if src == dst or local is None:
        return local
    base = {"shape": tuple(shape), "ranks": pl.flat_ranks, "index": idx}
    s, d = src[0], dst[0]

    def box(name: str, x, attrs: dict, comm: bool):
        return _box_op(name, x, attrs, comm, interp, extra)

    if s == "S" and d == "S":
        return box("boxing_s_to_s", local, dict(base, in_dim=src[1], out_dim=dst[1]), True)
    if s == "S" and d == "B":
        return box("boxing_s_to_b", local, dict(base, in_dim=src[1]), True)
    if s == "S" and d == "P":
        full = box("boxing_s_to_b", local, dict(base, in_dim=src[1]), True)
        return box("boxing_b_to_p", full, base, False)
    if s == "P" and d == "B":
        return box("boxing_p_to_b", local, base, True)
    if s == "P" and d == "S":
        return box("boxing_p_to_s", local, dict(base, out_dim=dst[1]), True)
    if s == "B" and d == "S":
        return box("boxing_b_to_s", local, dict(base, out_dim=dst[1]), False)
    return box("boxing_b_to_p", local, base, False)  # B -> P


def _cost(src: tuple, dst: tuple, nbytes: int) -> float:
    """Bytes moved to box a tensor of ``nbytes`` from ``src`` to ``dst``; local re-layouts
    (B->S, B->P) cost a little, so an all-broadcast call stays broadcast."""
    if src == dst:
        return 0.0
    if src == B:
        return nbytes * 1e-3
    if src == P and dst == B:
        return 2.0 * nbytes
    return float(nbytes)


# ---- the interpreter ----------------------------------------------------------------------------

def _describe(t) -> str:
    return f"global on {t.placement}" if is_global(t) else "a local tensor"


def _common_placement(op, tensors: list) -> placement:
    pl = None
    first = None
    for t in tensors:
        if not is_global(t):
            g = next(x for x in tensors if is_global(x))
            raise ValueError(f"{op.name}: mixes a local tensor (shape {tuple(t._shape)}) with "
                             f"a global tensor placed on {g.placement}; make it global with "
                             f"to_global(placement, sbp) first")
        if pl is None:
            pl, first = t.placement, t
        elif t.placement != pl:
            raise ValueError(f"{op.name}: inputs are on different placements: "
                             f"{first.placement} and {t.placement} (moving a tensor between "
                             f"placements is not supported yet)")
    check_1d(op.name, pl)
    return pl


def agreed_seed() -> int:
    """A seed drawn from the global generator, the same on every rank (rank 0's)."""
    return groups.bcast_object(default_generator.next_seed(), 0, "random seed")


_WARNED: set = set()


def _warn_no_rule(op) -> None:
    """With ``ACTORFLOW_SBP_DEBUG=1``: say once per op that it runs broadcast for want of an
    SBP rule."""
    if op.name not in _WARNED and os.environ.get("ACTORFLOW_SBP_DEBUG") == "1":
        _WARNED.add(op.name)
        warnings.warn(f"{op.name}: no SBP rule; it runs on global tensors broadcast "
                      f"(replicated: every rank computes the whole result)", stacklevel=2)


def _candidates(op, inputs: list, attrs: dict, n_out: int) -> list:
    sigs = []
    if op.sbp_fn is None:
        _warn_no_rule(op)
    elif not op.random:
        sigs = [s if isinstance(s, Sig) else Sig(*s) for s in op.sbp_fn(inputs, attrs)]
    sigs.append(Sig((B,) * len(inputs), (B,) * n_out))
    return sigs


def choose_signature(op, inputs: list, attrs: dict, out, metas: list) -> Sig:
    """The SBP signature a call on global ``inputs`` (eager or lazy) runs with: of the op's
    rule and all-broadcast, one that keeps in-place and mutated tensors' sbp and moves the
    fewest bytes. Both global interpreters call it."""
    sigs = _candidates(op, inputs, attrs, len(metas))
    fixed = {}
    if op.mutates or op.mutates_fn is not None:
        for i in op.mutated_inputs(len(inputs), attrs):
            fixed[i] = inputs[i].sbp[0].attr()
    best, best_cost = None, None
    for sig in sigs:
        if len(sig.ins) != len(inputs) or len(sig.outs) != len(metas):
            raise registry.OpError(f"{op.name}: its SBP rule gave a signature of "
                                   f"{len(sig.ins)} inputs and {len(sig.outs)} outputs for a "
                                   f"call with {len(inputs)} and {len(metas)}")
        if any(sig.ins[i] != s for i, s in fixed.items()):
            continue
        if out is not None and any(o.sbp[0].attr() != s for o, s in zip(out, sig.outs)):
            continue
        cost = 0.0
        for t, s in zip(inputs, sig.ins):
            cost += _cost(t.sbp[0].attr(), s, t.numel() * t.dtype.itemsize)
        if best is None or cost < best_cost:
            best, best_cost = sig, cost
    if best is None:
        want = [str(o.sbp[0]) for o in out] if out is not None else \
            [str(inputs[i].sbp[0]) for i in fixed]
        raise ValueError(f"{op.name}: no SBP signature writes in place into tensors laid out "
                         f"as {', '.join(want)} (inputs: "
                         f"{', '.join(str(t.sbp[0]) for t in inputs)})")
    return best


class GlobalInterpreter:
    """Runs ops on global tensors (see the module docstring)."""

    def apply(self, op, inputs: list, attrs: dict, out: list | None, record_: bool):
        """``(results, node inputs, node outputs)``: see ``actorflow.dispatch.apply``."""
        pl = _common_placement(op, list(inputs) + list(out or ()))
        metas = infer(op, inputs, attrs)
        if op.random and attrs.get("seed") is None:
            attrs = dict(attrs, seed=agreed_seed())
        sig = choose_signature(op, inputs, attrs, out, metas)
        idx = pl.index(world().rank)
        n = len(pl.flat_ranks)
        saved = inputs
        if out is not None:
            check_inplace(op, inputs, out, metas, record_)
            if record_:
                saved = [_old_identity(t) if any(t is o for o in out) else t for t in inputs]
        locals_ = None
        if idx is not None:
            shards = [box_shard(t._h.local, t.sbp[0].attr(), s, t._shape, pl, idx)
                      for t, s in zip(inputs, sig.ins)]
            local_out = None if out is None else [o._h.local for o in out]
            local_attrs = attrs if sig.local is None else sig.local(attrs, idx, n)
            locals_ = _EAGER.apply(op, shards, local_attrs, local_out, False)[0]
            if sig.post is not None:
                locals_ = sig.post(locals_, attrs, idx, n)
        if out is not None:
            for t in out:
                t._vc[0] += 1
            return list(out), saved, list(out)
        if op.mutates or op.mutates_fn is not None:
            for i in op.mutated_inputs(len(inputs), attrs):
                inputs[i]._vc[0] += 1
        results = []
        for k, m in enumerate(metas):
            sbp = (SbpParallel.from_attr(sig.outs[k]),)
            local = None if locals_ is None else locals_[k]
            if local is not None and tuple(local._shape) != shard_shape(m[0], sig.outs[k], n,
                                                                       idx):
                raise registry.OpError(
                    f"{op.name}: SBP signature {sig.ins} -> {sig.outs} gave a shard of shape "
                    f"{tuple(local._shape)} for a logical output of shape {tuple(m[0])}")
            results.append(wrap(local, pl, sbp, m[0], m[1]))
        return results, inputs, results


def _old_identity(t: Tensor) -> Tensor:
    """A global tensor with ``t``'s autograd identity and a copy of its current shard."""
    h = t._h
    local = None if h.local is None else _EAGER.old_identity(h.local)
    a = wrap(local, h.placement, h.sbp, t._shape, t.dtype)
    a.requires_grad, a.grad_fn, a._out_idx = t.requires_grad, t.grad_fn, t._out_idx
    return a


GLOBAL = GlobalInterpreter()


# ---- conversions --------------------------------------------------------------------------------

def _record(op_name: str, inputs: list, outputs: list, attrs: dict) -> None:
    op = registry.get(op_name)
    if grad_mode._state.enabled and any(t.requires_grad for t in inputs):
        record(op, inputs, outputs, attrs)


def _sbp_arg(what: str, sbp, placement_: placement) -> tuple:
    sbp = as_sbp_tuple(sbp, what)
    if len(sbp) != len(placement_.hierarchy):
        raise ValueError(f"{what}: {len(sbp)} sbp for a placement of hierarchy "
                         f"{placement_.hierarchy}; give one per placement dim")
    return sbp


def to_local(t: Tensor) -> Tensor:
    """This rank's shard of global ``t`` (an alias; differentiable). Ranks outside the
    placement get an empty tensor."""
    h = t._h
    local = h.local
    if local is None:
        local = Tensor._wrap(np.empty((0,), t.dtype.np), t.dtype)
    out = Tensor._wrap(local._h.raw, local.dtype, local._vc, local._h.storage)
    _record("to_local", [t], [out], {})
    return out


def box(t: Tensor, sbp) -> Tensor:
    """Global ``t`` re-laid out as ``sbp`` on its placement (differentiable)."""
    h = t._h
    check_1d("to_global", h.placement)
    sbp = _sbp_arg("to_global", sbp, h.placement)
    if sbp == h.sbp:
        return t
    src, dst = h.sbp[0].attr(), sbp[0].attr()
    idx = h.placement.index(world().rank)
    local = box_shard(h.local, src, dst, t._shape, h.placement, idx)
    out = wrap(local, h.placement, sbp, t._shape, t.dtype)
    record_boxing(t, out, src, dst)
    return out


def record_boxing(t: Tensor, out: Tensor, src: tuple, dst: tuple) -> None:
    """Record global ``t`` boxed from ``src`` to ``dst`` as ``out`` for autograd."""
    # (S->P runs as S->B then B->P; its node is recorded as the all-gather: a boxing's
    # gradient depends only on the input's sbp)
    _record(_BOXING_OP[(src[0], dst[0])], [t], [out], {"in_sbp": src})


_BOXING_OP = {("S", "S"): "boxing_s_to_s", ("S", "B"): "boxing_s_to_b",
              ("S", "P"): "boxing_s_to_b", ("P", "B"): "boxing_p_to_b",
              ("P", "S"): "boxing_p_to_s", ("B", "S"): "boxing_b_to_s",
              ("B", "P"): "boxing_b_to_p"}


def from_local(t: Tensor, placement_: placement, sbp) -> Tensor:
    """A global tensor whose shard on this rank is local ``t`` (differentiable): broadcast
    takes the placement's first rank's values; split concatenates the ranks' tensors (of any
    sizes) along its dim; partial_sum sums them. Every rank of the program calls it."""
    if not isinstance(placement_, placement):
        raise TypeError(f"to_global: placement must be a flow.placement, got {placement_!r}")
    check_1d("to_global", placement_)
    sbp = _sbp_arg("to_global", sbp, placement_)
    s = sbp[0]
    idx = placement_.index(world().rank)
    mine = tuple(t._shape) if idx is not None else None
    by_rank = groups.allgather_object(mine, "to_global shard shapes")
    shapes = [by_rank[r] for r in placement_.flat_ranks] if world().size > 1 else [mine]
    first = shapes[0]
    n = len(placement_.flat_ranks)
    attrs = {"sbp": s.attr()}
    if s.is_split:
        d = s.dim
        if any(len(x) != len(first) or x[:d] + x[d + 1:] != first[:d] + first[d + 1:]
               for x in shapes) or d >= len(first):
            raise ValueError(f"to_global: split({d}) needs local tensors that agree on every "
                             f"dim but {d}; the ranks hold {shapes}")
        sizes = [x[d] for x in shapes]
        logical = first[:d] + (sum(sizes),) + first[d + 1:]
        even = all(shard_range(logical[d], n, k) == (sum(sizes[:k]), sum(sizes[:k + 1]))
                   for k in range(n))
        local = t
        if idx is not None and not even:
            # rebalance to numpy.array_split's layout: gather, then take this rank's piece
            base = {"shape": logical, "ranks": placement_.flat_ranks, "index": idx}
            full = _box_op("boxing_s_to_b", t, dict(base, in_dim=d), True)
            local = _box_op("boxing_b_to_s", full, dict(base, out_dim=d), False)
            attrs.update(start=sum(sizes[:idx]), stop=sum(sizes[:idx + 1]))
        elif idx is not None:
            local = _alias(t)
    else:
        if any(x != first for x in shapes):
            raise ValueError(f"to_global: {s} needs local tensors of one shape; the ranks hold "
                             f"{shapes}")
        logical = first
        local = _alias(t) if idx is not None else None
        if s.is_broadcast and idx is not None and n > 1:
            local = box_shard(box_shard(t, B, P, logical, placement_, idx), P, B, logical,
                              placement_, idx)
    out = wrap(local if idx is not None else None, placement_, sbp, logical, t.dtype)
    _record("local_to_global", [t], [out], attrs)
    return out


def _alias(t: Tensor) -> Tensor:
    return Tensor._wrap(t._h.raw, t.dtype, t._vc, t._h.storage)


def from_full(t: Tensor, placement_: placement, sbp) -> Tensor:
    """A global tensor of the logical values ``t`` that every rank holds in full (creation
    ops): each rank keeps its shard, nothing moves. Not recorded by autograd."""
    if not isinstance(placement_, placement):
        raise TypeError(f"placement must be a flow.placement, got {placement_!r}")
    check_1d("global tensor creation", placement_)
    sbp = _sbp_arg("global tensor creation", sbp, placement_)
    idx = placement_.index(world().rank)
    local = None
    if idx is not None:
        local = box_shard(t, B, sbp[0].attr(), t._shape, placement_, idx)
    return wrap(local, placement_, sbp, t._shape, t.dtype)


__all__ = ["GlobalBlob", "GlobalInterpreter", "GLOBAL", "is_global", "wrap", "box", "to_local",
           "from_local", "from_full", "box_shard", "agreed_seed", "check_1d", "boxing",
           "choose_signature", "record_boxing"]
