"""Eager global tensors: the handle, the eager-global interpreter, and the conversions
(to and from local tensors, boxing, moves between placements).

A global tensor is a ``Tensor`` whose handle is a ``GlobalBlob``: placement, SBP (a tuple of
``SbpParallel``, one per hierarchy axis of the placement) and this rank's shard, an ordinary
eager tensor (None on ranks outside the placement). The Tensor's ``_shape`` and ``dtype`` are
the logical ones. The n-d layout, boxing and signature choice live in
``actorflow.dispatch.nd_sbp``.

``GlobalInterpreter`` (chosen by ``dispatch.apply`` when an input is global) runs one op call:
it infers the logical outputs with the op's own inference, asks the op's SBP rule
(``op.sbp_fn``, see ``actorflow.ops.boxing``) for signatures (one per hierarchy axis), adds the
all-broadcast one (any op runs replicated), keeps those an in-place or mutating call allows,
picks the one that moves the fewest bytes, boxes the shards with the boxing ops, runs the
eager-local interpreter on the shards (the same kernels) and wraps the outputs. Autograd records
once, in ``dispatch.apply``, on the global tensors, so gradients of global tensors are global.
The lazy-global interpreter (``actorflow.dispatch.lazy_global``, a Graph's trace) chooses with
the same ``choose_signature`` and records boxing with the same ``record_boxing``.

Boxing of a shard issues the boxing ops on the VM's communication worker; metadata the ranks
must agree on at call time (shard sizes of ``to_global`` from local tensors, seeds of random
ops) travels over the control communicator on the caller's thread.
"""
from __future__ import annotations

import itertools
import os
import warnings

import numpy as np

from actorflow.autograd import grad_mode
from actorflow.dispatch import copy_slices
from actorflow.dispatch.common import check_inplace, infer, note_view_mode, record
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.dispatch.meta import META
from actorflow.dispatch.boxing import box_1d, box_axis, box_op, box_shard
from actorflow.dispatch.nd_sbp import NdSig, run_levels, select_signature
from actorflow.dispatch import global_meta as meta
from actorflow.process import groups
from actorflow.process.world import world
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import (B, P, as_sbp_tuple, coords_of, nd_attrs,
                                              nd_shard_shape, nd_value)
from actorflow.ops import boxing, registry
from actorflow.random import default_generator
from actorflow.tensor import DeviceMetaBlob, Tensor, meta_tensor, register_tensor_methods

_EAGER = EagerInterpreter()


def _no_data(pl: placement) -> bool:
    """Whether global tensors on ``pl`` have meta shards: a ``placement("meta", ...)``, or
    any placement while ``world.simulate_rank`` plays a rank (no values, no collectives)."""
    return pl.type == "meta" or world().simulated


def _shard_interp(pl: placement):
    """The interpreter of a placement's shards: the meta one without data (``_no_data``:
    every shard is a meta tensor, ops and boxing infer only)."""
    return META if _no_data(pl) else _EAGER


def _boxer(pl: placement):
    """The ``interp`` argument of ``box_shard``/``box_op`` on a placement (None: eager)."""
    return META if _no_data(pl) else None


_GLOBAL_IDS = itertools.count(1)


class GlobalBlob:
    """Handle of a global tensor: placement, sbp, this rank's shard (``local``, or None
    outside the placement), and the logical shape and dtype. ``get()`` gathers the logical
    values (every rank must call it, as every rank of the placement takes part)."""

    __slots__ = ("placement", "sbp", "local", "shape", "dtype", "global_id")
    is_global = True
    is_lazy = False

    def __init__(self, placement_, sbp: tuple, local, shape: tuple, dtype):
        self.placement, self.sbp, self.local = placement_, sbp, local
        self.shape, self.dtype = tuple(shape), dtype
        self.global_id = next(_GLOBAL_IDS)  # Tensor.global_id(): creation order, every rank

    def get(self) -> np.ndarray:
        pl = self.placement
        if world().simulated:
            raise RuntimeError(f"a global tensor of shape {self.shape} on {pl} has no values "
                               f"while simulate_rank plays rank {world().rank} (shapes only)")
        coords = coords_of(pl, world().rank)
        arr = None
        if coords is not None:
            full = box_shard(self.local, nd_attrs(self.sbp), (B,) * len(self.sbp), self.shape,
                             pl, coords)
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


def _world_ranks() -> tuple:
    return tuple(range(world().size))


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
                             f"{first.placement} and {t.placement} (move one with "
                             f"to_global(placement=..., sbp=...) first)")
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


def choose_signature(op, inputs: list, attrs: dict, out, metas: list,
                     pl: placement) -> NdSig:
    """The n-d SBP signature a call on global ``inputs`` on placement ``pl`` runs with (eager
    or lazy: both global interpreters call it): of the op's rule (per hierarchy axis) and
    all-broadcast, one that keeps in-place outputs' and mutated inputs' sbp and moves the
    fewest bytes (``nd_sbp.select_signature``). ``inputs`` need ``_shape``, ``dtype``,
    ``sbp`` and ``placement``."""
    if op.sbp_fn is None:
        _warn_no_rule(op)
    fixed = {}
    if op.may_mutate:
        for i in op.mutated_inputs(len(inputs), attrs):
            fixed[i] = nd_attrs(inputs[i].sbp)
    out_sbps = None if out is None else [nd_attrs(o.sbp) for o in out]
    best = select_signature(op, [(t._shape, t.dtype) for t in inputs],
                            [nd_attrs(t.sbp) for t in inputs], attrs, pl, len(metas), fixed,
                            out_sbps, inputs)
    if best is None:
        want = [str(o.sbp) for o in out] if out is not None else \
            [str(inputs[i].sbp) for i in fixed]
        raise ValueError(f"{op.name}: no SBP signature writes in place into tensors laid out "
                         f"as {', '.join(want)} (inputs: "
                         f"{', '.join(str(t.sbp) for t in inputs)})")
    return best


class GlobalInterpreter:
    """Runs ops on global tensors (see the module docstring)."""

    def apply(self, op, inputs: list, attrs: dict, out: list | None, record_: bool):
        """``(results, node inputs, node outputs, then)``: see ``actorflow.dispatch.apply``;
        ``then`` rebases the autograd histories of a written view and its base."""
        pl = _common_placement(op, list(inputs) + list(out or ()))
        metas = infer(op, inputs, attrs)
        if op.random and attrs.get("seed") is None:
            attrs = dict(attrs, seed=agreed_seed())
        if out is not None and not op.may_mutate:
            try:
                sig = choose_signature(op, inputs, attrs, out, metas, pl)
            except ValueError:  # no signature keeps the written sbp: out of place, boxed back
                return _write_boxed_back(self, op, inputs, attrs, out, metas, pl, record_)
        else:
            sig = choose_signature(op, inputs, attrs, out, metas, pl)
        coords = coords_of(pl, world().rank)
        hier = pl.hierarchy
        saved = inputs
        if out is not None:
            check_inplace(op, inputs, out, metas, record_)
            if record_:
                saved = [_old_identity(t) if any(t is o for o in out) else t for t in inputs]
        locals_ = None
        if coords is not None:
            interp = _shard_interp(pl)
            shards = [box_shard(t._h.local, nd_attrs(t.sbp), s, t._shape, pl, coords, _boxer(pl))
                      for t, s in zip(inputs, sig.ins)]
            local_out = None if out is None else [o._h.local for o in out]
            local_attrs, post = run_levels(sig.levels(coords), attrs, coords, hier)
            locals_ = post(interp.apply(op, shards, local_attrs, local_out, False)[0])
        if out is not None:
            for t in out:
                t._vc[0] += 1
            return list(out), saved, list(out), copy_slices.after_write_step(inputs, out,
                                                                             record_)
        if op.may_mutate:
            for i in op.mutated_inputs(len(inputs), attrs):
                inputs[i]._vc[0] += 1
        results = []
        for k, m in enumerate(metas):
            sbp = nd_value(sig.outs[k])
            local = None if locals_ is None else locals_[k]
            if local is not None and tuple(local._shape) != nd_shard_shape(m[0], sig.outs[k],
                                                                           hier, coords):
                raise registry.OpError(
                    f"{op.name}: SBP signature {sig.ins} -> {sig.outs} gave a shard of shape "
                    f"{tuple(local._shape)} for a logical output of shape {tuple(m[0])}")
            results.append(wrap(local, pl, sbp, m[0], m[1]))
        if op.view_fn is not None:
            # a view for the in-place checks (decided from the sbps alone, so every rank
            # agrees); if its input had to be boxed, its shards are a copy: writes into it would
            # not reach the base, so check_inplace refuses them
            root = inputs[0] if inputs[0]._base is None else inputs[0]._base
            # (a split sliced into partial sums is a copy too: its shards hold zeros)
            copied = tuple(sig.ins[0]) != tuple(nd_attrs(inputs[0].sbp)) \
                or getattr(inputs[0], "_copied_view", False) \
                or any(o == P and i != P for o, i in zip(sig.outs[0], sig.ins[0]))
            for t in results:
                t._base = root
                if copied:
                    t._copied_view = True
            note_view_mode(inputs[0], root, results)
            if len(inputs) == 1:  # where they lie in root: a write into one rebases root
                copy_slices.note_global_view(inputs[0], root, op, attrs, results)
        return results, inputs, results, None


def _write_boxed_back(interp, op, inputs, attrs, out, metas, pl, record_):
    """An in-place call none of whose op's signatures keeps the written tensors' sbp (e.g.
    ``t[0] = 1.0`` on a split(0) ``t``: setitem runs broadcast): the op out of place, each
    result boxed to its tensor's sbp and copied into its shard, so the write keeps the layout
    (as in a trace: ``lazy_global.LazyGlobalInterpreter._write_in_place``)."""
    check_inplace(op, inputs, out, metas, record_)
    saved = inputs
    if record_:
        saved = [_old_identity(t) if any(t is o for o in out) else t for t in inputs]
    with grad_mode.no_grad():
        results = interp.apply(op, inputs, attrs, None, False)[0]
        coords = coords_of(pl, world().rank)
        for t, r in zip(out, results):
            r = box(r, t.sbp)
            if coords is not None and t._h.local is not None:
                _shard_interp(pl).apply(registry.get("copy"), [r._h.local], {},
                                        [t._h.local], False)
    for t in out:
        t._vc[0] += 1
    return list(out), saved, list(out), copy_slices.after_write_step(inputs, out, record_)


def _old_identity(t: Tensor) -> Tensor:
    """A global tensor with ``t``'s autograd identity and a copy of its current shard."""
    h = t._h
    local = None if h.local is None else _shard_interp(h.placement).old_identity(h.local)
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
        raise ValueError(f"{what}: {len(sbp)} sbp {sbp} for a placement of hierarchy "
                         f"{placement_.hierarchy}; give one per placement dim (as OneFlow)")
    return sbp


def _outside(t: Tensor) -> tuple:
    # the shape of the shard a rank outside the placement shows (OneFlow: ndim zeros)
    return (0,) * len(t._shape)


def to_local(t: Tensor) -> Tensor:
    """This rank's shard of global ``t`` (an alias; differentiable). Ranks outside the
    placement get an empty tensor of ``t``'s number of dims, every one 0 (OneFlow's shape)."""
    h = t._h
    local = h.local
    if _no_data(h.placement) or (local is not None and type(local._h) is DeviceMetaBlob):
        # a meta shard (sharing the shard's version counter)
        out = _alias(local) if local is not None else meta_tensor(_outside(t), t.dtype)
    else:
        if local is None:
            local = Tensor._wrap(np.empty(_outside(t), t.dtype.np), t.dtype)
        out = Tensor._wrap(local._h.raw, local.dtype, local._vc, local._h.storage)
    out._base = t  # the in-place checks see the alias (and views of it) as a view of t
    _record("to_local", [t], [out], {})
    return out


def box(t: Tensor, sbp, grad_sbp=None, copy: bool = False) -> Tensor:
    """Global ``t`` re-laid out as ``sbp`` on its placement (differentiable). Its gradient
    is boxed to ``grad_sbp`` (default: ``t``'s sbp); ``copy`` gives a new tensor even when
    nothing moves."""
    h = t._h
    sbp = _sbp_arg("to_global", sbp, h.placement)
    src, dst = nd_attrs(h.sbp), nd_attrs(sbp)
    back = src if grad_sbp is None else nd_attrs(_sbp_arg("to_global", grad_sbp, h.placement))
    if src == dst and back == src and not copy:
        return t
    if src == dst:
        local = h.local
        if local is not None:
            local = _shard_interp(h.placement).apply(registry.get("copy"), [local], {}, None,
                                                     False)[0][0] if copy else _alias(local)
        out = wrap(local, h.placement, sbp, t._shape, t.dtype)
        _record("boxing_nd", [t], [out], {"in_sbp": back})
        return out
    coords = coords_of(h.placement, world().rank)
    local = box_shard(h.local, src, dst, t._shape, h.placement, coords, _boxer(h.placement))
    out = wrap(local, h.placement, sbp, t._shape, t.dtype)
    record_boxing(t, out, src, dst, back)
    return out


def record_boxing(t: Tensor, out: Tensor, src: tuple, dst: tuple, back: tuple | None = None,
                  grad_mode: str = "restore") -> None:
    """Record global (eager or lazy) ``t`` boxed from n-d ``src`` to ``dst`` (attr tuples) as
    ``out`` for autograd: the 1-D boxing op's node, else ``boxing_nd`` (n-d, partial_max).
    ``back``: the sbp the gradient is boxed to (default ``src``); ``grad_mode="identity"``:
    the gradient is passed on in whatever sbp it has, not boxed. (S->P runs as S->B then
    B->P; its node is recorded as the all-gather: a boxing's gradient depends only on the sbp
    the gradient goes back to.)"""
    if grad_mode not in ("restore", "identity"):
        raise ValueError(f"record_boxing: grad_mode must be 'restore' or 'identity', got "
                         f"{grad_mode!r}")
    back = src if back is None else back
    extra = {"grad_mode": grad_mode} if grad_mode == "identity" else {}
    if len(src) == 1 and (src[0][0], dst[0][0]) in _BOXING_OP:
        _record(_BOXING_OP[(src[0][0], dst[0][0])], [t], [out], {"in_sbp": back[0], **extra})
    else:
        _record("boxing_nd", [t], [out], {"in_sbp": back, **extra})


_BOXING_OP = {("S", "S"): "boxing_s_to_s", ("S", "B"): "boxing_s_to_b",
              ("S", "P"): "boxing_s_to_b", ("P", "B"): "boxing_p_to_b",
              ("P", "S"): "boxing_p_to_s", ("B", "S"): "boxing_b_to_s",
              ("B", "P"): "boxing_b_to_p"}


def move(t: Tensor, placement_: placement, sbp) -> Tensor:
    """Global ``t`` on another placement, laid out as ``sbp`` (differentiable; the gradient
    moves back). The source ranks gather it, the source's first rank broadcasts it over the
    ranks of both placements, the target ranks keep their shards; ranks outside the target get
    a global tensor with no shard. Every rank of the program calls it."""
    _check_placement("to_global", placement_)
    h = t._h
    sbp = _sbp_arg("to_global", sbp, placement_)
    src_pl, rank = h.placement, world().rank
    if (src_pl.type == "meta") != (placement_.type == "meta"):
        raise ValueError(f"to_global: can't move a global tensor of shape {tuple(t._shape)} "
                         f"from {src_pl} to {placement_} (meta tensors have no data)")
    boxer = _boxer(src_pl)
    src_c, dst_c = coords_of(src_pl, rank), coords_of(placement_, rank)
    union = src_pl.flat_ranks + tuple(r for r in placement_.flat_ranks
                                      if r not in src_pl.flat_ranks)
    local = None
    if rank in union:
        full = box_shard(h.local, nd_attrs(h.sbp), (B,) * len(h.sbp), t._shape, src_pl, src_c,
                         boxer) if src_c is not None \
            else Tensor._wrap(np.empty((0,), t.dtype.np), t.dtype)
        attrs = {"shape": tuple(t._shape), "ranks": union, "index": union.index(rank)}
        full = box_op("boxing_move", full, attrs, True, boxer)
        if dst_c is not None:
            local = box_shard(full, (B,) * len(sbp), nd_attrs(sbp), t._shape, placement_,
                              dst_c, boxer)
    out = wrap(local, placement_, sbp, t._shape, t.dtype)
    _record("boxing_move", [t], [out], {"in_ranks": src_pl.flat_ranks,
                                         "in_hierarchy": src_pl.hierarchy,
                                         "in_sbp": nd_attrs(h.sbp)})
    return out


def _check_placement(what: str, placement_) -> None:
    if not isinstance(placement_, placement):
        raise TypeError(f"{what}: placement must be a flow.placement, got {placement_!r}")


def from_local(t: Tensor, placement_: placement, sbp, check_meta: bool = True) -> Tensor:
    """A global tensor whose shard on this rank is local ``t`` (differentiable): broadcast
    takes the placement's first rank's values; split concatenates the ranks' tensors along
    its dim (their sizes there must be balanced, as numpy.array_split's); partial_sum sums
    them. On an n-d placement each axis does so along its groups (broadcast: the values of
    the group's first rank), and the shards must have the sizes the layout gives. Every rank
    of the program calls it; ``check_meta`` checks that they agree on a 1-D placement
    (``actorflow.dispatch.global_meta``; an n-d placement always exchanges shard shapes)."""
    _check_placement("to_global", placement_)
    sbp = _sbp_arg("to_global", sbp, placement_)
    if (placement_.type == "meta") != (type(t._h) is DeviceMetaBlob):
        raise ValueError(f"to_global: a local tensor on {t.device} (shape {tuple(t._shape)}) "
                         f"can't be placed on {placement_}: meta tensors go to meta placements")
    if len(sbp) > 1:
        return _from_local_nd(t, placement_, sbp)
    s = sbp[0]
    idx = placement_.index(world().rank)
    shapes, dtype = meta.local_shapes(tuple(t._shape), t.dtype, placement_, sbp, check_meta)
    first = shapes[0]
    n = len(placement_.flat_ranks)
    logical = first
    if s.is_split:
        d = s.dim
        if d >= len(first):
            raise ValueError(f"to_global: Split axis out of range (expected to be in range of "
                             f"[0, {len(first)}), but got {d}! (split({d}) of local tensors "
                             f"of shape {first})")
        logical = first[:d] + (sum(x[d] for x in shapes),) + first[d + 1:]
    local = _shard_from(t, placement_) if idx is not None else None
    if s.is_broadcast and idx is not None and n > 1:
        ranks = placement_.flat_ranks
        bx = _boxer(placement_)
        local = box_1d(box_1d(t, B, P, logical, ranks, idx, bx), P, B, logical, ranks, idx, bx)
    out = wrap(local, placement_, sbp, logical, dtype)  # (the placement's, outside it)
    _record("local_to_global", [t], [out], {"sbp": s.attr()})
    return out


def _from_local_nd(t: Tensor, pl: placement, sbp: tuple) -> Tensor:
    sbp_a = nd_attrs(sbp)
    hier = pl.hierarchy
    coords = coords_of(pl, world().rank)
    mine = tuple(t._shape) if coords is not None else None
    by_rank = groups.allgather_object(mine, "to_global shard shapes")
    shapes = [by_rank[r] for r in pl.flat_ranks] if world().size > 1 else [mine]
    first = list(shapes[0])
    # a split dim's logical size: the sizes along it summed over the ranks that differ from
    # the first only on the axes splitting it
    for d in range(len(first)):
        axes = [k for k, s in enumerate(sbp_a) if s == ("S", d)]
        if axes:
            first[d] = sum(shapes[i][d] for i, c in enumerate(np.ndindex(*hier))
                           if len(shapes[i]) == len(first)
                           and all(c[k] == 0 for k in range(len(hier)) if k not in axes))
    logical = tuple(first)
    want = [nd_shard_shape(logical, sbp_a, hier, c) if all(
        s[0] != "S" or s[1] < len(logical) for s in sbp_a) else None for c in np.ndindex(*hier)]
    if any(w != tuple(x) for w, x in zip(want, shapes)):
        raise ValueError(f"to_global: local tensors of shapes {shapes} (ranks {pl.flat_ranks}) "
                         f"are not the shards of one tensor laid out as {sbp} on hierarchy "
                         f"{hier} (splits as numpy.array_split, axis 0 first)")
    local = None
    if coords is not None:
        local, cur, bx = _shard_from(t, pl), sbp_a, _boxer(pl)
        for k, s in enumerate(sbp_a):
            if s == B:  # the values of the group's first rank, as in 1-D
                mid = cur[:k] + (P,) + cur[k + 1:]
                local = box_axis(box_axis(local, cur, k, P, logical, pl, coords, bx), mid, k,
                                 B, logical, pl, coords, bx)
    out = wrap(local, pl, sbp, logical, t.dtype)
    _record("local_to_global", [t], [out], {"sbp": sbp_a})
    return out


def _shard_from(t: Tensor, pl: placement) -> Tensor:
    """The shard that local ``t`` becomes on ``pl``: an alias, or a meta tensor (``_no_data``)."""
    if _no_data(pl) and type(t._h) is not DeviceMetaBlob:
        return meta_tensor(t._shape, t.dtype)
    return _alias(t)


def _alias(t: Tensor) -> Tensor:
    if type(t._h) is DeviceMetaBlob:  # a meta shard: same metadata and version counter
        out = meta_tensor(t._shape, t.dtype)
        out._vc = t._vc
        return out
    return Tensor._wrap(t._h.raw, t.dtype, t._vc, t._h.storage)


def from_full(t: Tensor, placement_: placement, sbp, what: str = "global tensor creation"
              ) -> Tensor:
    """A global tensor of the logical values ``t`` that every rank holds in full (creation
    ops): each rank keeps its shard, nothing moves. Not recorded by autograd. ``what`` names
    the creation op in errors (one sbp per placement dim, as OneFlow's creation ops ask)."""
    _check_placement(what, placement_)
    sbp = _sbp_arg(what, sbp, placement_)
    tracer = getattr(t._h, "tracer", None)
    if tracer is not None:
        return _lazy_from_full(tracer, t, placement_, sbp)
    coords = coords_of(placement_, world().rank)
    local = None
    boxer = None
    if _no_data(placement_):  # values are dropped: the shards are meta tensors
        t, boxer = meta_tensor(t._shape, t.dtype), META
    if coords is not None:
        local = box_shard(t, (B,) * len(sbp), nd_attrs(sbp), t._shape, placement_, coords,
                          boxer)
    return wrap(local, placement_, sbp, t._shape, t.dtype)


register_tensor_methods({"_from_full": staticmethod(from_full)})  # Tensor(..., placement, sbp)


def _lazy_from_full(tracer, t: Tensor, placement_: placement, sbp) -> Tensor:
    """``from_full`` inside a graph's trace (``t`` a lazy constant, e.g. the seed gradient
    ``ones_like(loss)`` of ``backward``): a global lazy tensor of that trace, broadcast and
    then boxed to ``sbp`` like any global tensor of the Job."""
    # late: lazy_global builds on this module
    from actorflow.dispatch.lazy_global import global_lazy, interpreter_for

    bcast = (B,) * len(placement_.hierarchy)
    g = global_lazy(tracer, tracer.lazy_of(t)._h.name, placement_, bcast, t._shape, t.dtype)
    dst = nd_attrs(sbp)
    return g if dst == bcast else interpreter_for(tracer).box_to(g, dst, "creation")


__all__ = ["GlobalBlob", "GlobalInterpreter", "GLOBAL", "is_global", "wrap", "box", "to_local",
           "from_local", "from_full", "move", "box_shard", "agreed_seed", "boxing",
           "choose_signature", "record_boxing"]
