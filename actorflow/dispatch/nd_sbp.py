"""N-d SBP: the layout of a global tensor over a placement with a hierarchy of rank axes, its
boxing one axis at a time, and the choice of an op's n-d signature.

An n-d SBP is one SBP per hierarchy axis (here as attr tuples, ``("S", d)``, ``("B",)``,
``("P",)``). The layout is OneFlow's, nested: axis 0 lays the logical tensor out over its
``hierarchy[0]`` groups of ranks (split, broadcast or partial sum), then axis 1 lays each
group's part out over the ranks of that group, and so on; two axes may split the same dim
(the inner one splits the outer one's piece, ``numpy.array_split`` at each level). A rank's
coordinates are its position in the placement's rank array; the ranks sharing every coordinate
but axis ``k`` form the *group along k*, whose communicator the 1-D boxing ops of that axis use.

Boxing between n-d SBPs changes one axis at a time with the 1-D boxing ops on the group along
that axis. Changing axis ``k`` is exact when no inner axis splits a dim that axis ``k``'s source
or target splits (the 1-D ops are linear and commute with slicing other dims); inner axes that
would conflict are first gathered to broadcast (innermost first), then every axis is boxed to
its target, outermost first.

The signature of an op call is one 1-D signature per axis, chosen by the op's own 1-D rule: the
rule of axis 0 sees the logical tensors; for each of its signatures, the rule of axis 1 sees
the parts a group holds (shapes and attrs as the axis-0 signature's ``local`` gives them), and
so on. A signature is kept only when every group admits it, so all ranks agree; each group then
runs its own ``local``/``post`` functions.

The boxing functions issue the boxing ops eagerly by default; given ``interp`` (a Graph's
tracer, see ``actorflow.dispatch.lazy_global``) and ``extra`` attrs (the graph's communicator),
they append the same ops to the Job being traced instead.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import numpy as np

from actorflow import vm
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.framework.placement import SbpParallel, placement
from actorflow.ops import registry
from actorflow.ops.boxing import B, M, P, Sig, shard_shape

_EAGER = EagerInterpreter()


def nd_attrs(sbp: tuple) -> tuple:
    """An SbpParallel tuple as a tuple of attr tuples."""
    return tuple(s.attr() for s in sbp)


def nd_value(attrs: tuple) -> tuple:
    """An n-d SBP attr tuple as a tuple of SbpParallel."""
    return tuple(SbpParallel.from_attr(a) for a in attrs)


def coords_of(pl: placement, rank: int) -> tuple | None:
    """``rank``'s coordinates in ``pl``'s rank array, or None when it is not one of its ranks."""
    idx = pl.index(rank)
    if idx is None or len(pl.hierarchy) == 1:
        return None if idx is None else (idx,)
    return tuple(int(c) for c in np.unravel_index(idx, pl.hierarchy))


def group_ranks(pl: placement, coords: tuple, axis: int) -> tuple:
    """The ranks sharing every coordinate of ``coords`` but ``axis``, in that axis's order."""
    arr = np.array(pl.flat_ranks).reshape(pl.hierarchy)
    at = tuple(slice(None) if k == axis else c for k, c in enumerate(coords))
    return tuple(int(r) for r in arr[at])


def nd_shard_shape(shape: tuple, sbp: tuple, hierarchy: tuple, coords: tuple) -> tuple:
    """The shard shape at ``coords`` of a logical ``shape`` laid out as n-d ``sbp``."""
    shape = tuple(shape)
    for s, n, c in zip(sbp, hierarchy, coords):
        shape = shard_shape(shape, s, n, c)
    return shape


# ---- boxing -------------------------------------------------------------------------------------

def box_op(name: str, local, attrs: dict, comm: bool, interp=None, extra: dict | None = None):
    """Run boxing op ``name`` on a shard (on the communication worker when it moves data), or,
    given ``interp`` (a Graph's tracer), add it with ``attrs`` and ``extra`` to the traced Job."""
    op = registry.get(name)
    if interp is not None:
        return interp.apply(op, [local], dict(attrs, **(extra or {})), None, False)[0][0]
    if comm:
        vm.push_worker(vm.pool().comm)
    try:
        return _EAGER.apply(op, [local], attrs, None, False)[0][0]
    finally:
        if comm:
            vm.pop_worker()


def box_1d(local, src: tuple, dst: tuple, shape: tuple, ranks: tuple, idx: int, interp=None,
           extra: dict | None = None):
    """The shard of rank ``idx`` of ``ranks`` of a tensor of ``shape`` laid out over them as
    1-D ``src``, re-laid out as ``dst`` through the boxing ops; ``local`` when they are equal.
    ``interp``/``extra``: see ``box_op``."""
    if src == dst or local is None:
        return local
    base = {"shape": tuple(shape), "ranks": tuple(ranks), "index": idx}

    def run(name: str, x, attrs: dict, comm: bool):
        return box_op(name, x, attrs, comm, interp, extra)

    if dst == M:  # every rank holding the values is a partial max of them
        return local if src == B else box_1d(local, src, B, shape, ranks, idx, interp, extra)
    if src == M:
        full = run("boxing_pm_to_b", local, base, True)
        return box_1d(full, B, dst, shape, ranks, idx, interp, extra)
    s, d = src[0], dst[0]
    if s == "S" and d == "S":
        return run("boxing_s_to_s", local, dict(base, in_dim=src[1], out_dim=dst[1]), True)
    if s == "S" and d == "B":
        return run("boxing_s_to_b", local, dict(base, in_dim=src[1]), True)
    if s == "S" and d == "P":
        full = run("boxing_s_to_b", local, dict(base, in_dim=src[1]), True)
        return run("boxing_b_to_p", full, base, False)
    if s == "P" and d == "B":
        return run("boxing_p_to_b", local, base, True)
    if s == "P" and d == "S":
        return run("boxing_p_to_s", local, dict(base, out_dim=dst[1]), True)
    if s == "B" and d == "S":
        return run("boxing_b_to_s", local, dict(base, out_dim=dst[1]), False)
    return run("boxing_b_to_p", local, base, False)  # B -> P


def box_axis(local, cur: tuple, axis: int, dst: tuple, shape: tuple, pl: placement,
             coords: tuple, interp=None, extra: dict | None = None):
    """Box axis ``axis`` of a shard laid out as n-d ``cur`` to 1-D ``dst`` on the group along
    that axis (the caller makes sure no inner axis conflicts). ``interp``/``extra``: see
    ``box_op``."""
    if cur[axis] == dst or local is None:
        return local
    hier = pl.hierarchy
    if hier[axis] == 1:
        return local  # a group of one: every 1-D boxing keeps the values
    part = nd_shard_shape(shape, cur[:axis] + (B,) + cur[axis + 1:], hier, coords)
    return box_1d(local, cur[axis], dst, part, group_ranks(pl, coords, axis), coords[axis],
                  interp, extra)


def _touched(a: tuple, b: tuple) -> set:
    return {s[1] for s in (a, b) if s[0] == "S"}


def _conflicts(src_k: tuple, dst_k: tuple, cur_j: tuple) -> bool:
    """Whether changing an axis from ``src_k`` to ``dst_k`` needs an inner axis laid out as
    ``cur_j`` gathered first: it splits a dim the change touches, or it is the other kind of
    partial reduction (a max of sums is not a sum of maxima)."""
    if cur_j[0] == "S":
        return cur_j[1] in _touched(src_k, dst_k)
    return cur_j in (P, M) and src_k in (P, M) and src_k != cur_j


def box_plan(src: tuple, dst: tuple) -> list:
    """The steps ``(axis, to)`` that box n-d ``src`` to ``dst`` one axis at a time: inner axes
    that conflict with a change of an outer one go to broadcast first (innermost first), then
    every axis goes to its target (outermost first)."""
    changing = {k for k in range(len(src)) if src[k] != dst[k]}
    freed: set = set()
    grew = True
    while grew:
        grew = False
        for j in range(1, len(src)):
            # (a freed axis changes src -> B, which touches no more than src -> dst)
            if j not in freed and any(_conflicts(src[k], dst[k], src[j]) for k in range(j)
                                      if k in changing or k in freed):
                freed.add(j)
                grew = True
    steps = [(j, B) for j in sorted(freed, reverse=True)]
    cur = [B if k in freed else s for k, s in enumerate(src)]
    for k in range(len(cur)):
        if cur[k] != dst[k]:
            steps.append((k, dst[k]))
            cur[k] = dst[k]
    return steps


def box_shard(local, src: tuple, dst: tuple, shape: tuple, pl: placement, coords: tuple,
              interp=None, extra: dict | None = None):
    """This rank's shard (at ``coords``) of a logical tensor of ``shape`` laid out as n-d
    ``src``, re-laid out as n-d ``dst``; ``local`` itself when they are equal.
    ``interp``/``extra``: see ``box_op``."""
    if src == dst or local is None:
        return local
    if len(src) == 1:
        return box_1d(local, src[0], dst[0], shape, pl.flat_ranks, coords[0], interp, extra)
    cur = tuple(src)
    for axis, to in box_plan(src, dst):
        local = box_axis(local, cur, axis, to, shape, pl, coords, interp, extra)
        cur = cur[:axis] + (to,) + cur[axis + 1:]
    return local


def _cost_1d(src: tuple, dst: tuple, nbytes: float) -> float:
    """Bytes moved to box ``nbytes`` from ``src`` to ``dst`` over one axis; local re-layouts
    (B->S, B->P) cost a little, so an all-broadcast call stays broadcast."""
    if src == dst:
        return 0.0
    if src == B:
        return nbytes * 1e-3
    if src in (P, M) and dst == B:
        return 2.0 * nbytes
    return float(nbytes)


def box_cost(src: tuple, dst: tuple, nbytes: int, hierarchy: tuple) -> float:
    """About the bytes a boxing from n-d ``src`` to ``dst`` moves: per changed axis, the 1-D cost
    of the part a group along it holds."""
    cost = 0.0
    for k, (s, d) in enumerate(zip(src, dst)):
        if s != d:
            part = nbytes
            for j, n in enumerate(hierarchy):
                if j != k and src[j][0] == "S":
                    part /= n
            cost += _cost_1d(s, d, part)
    return cost


# ---- signatures ---------------------------------------------------------------------------------

class NdSig(NamedTuple):
    """An n-d signature: per input and output an n-d SBP (attr tuples, one per hierarchy axis);
    ``levels(coords)`` gives the 1-D ``Sig`` of each axis for the groups of ``coords`` (their
    ``local``/``post`` functions)."""

    ins: tuple
    outs: tuple
    levels: Callable


def rule_signatures(op, inputs: list, attrs: dict, n_out: int) -> list:
    """The 1-D signatures of a call on ``inputs`` (global tensors of one axis: ``_shape``,
    ``dtype``, a one-entry ``sbp``, a 1-D ``placement`` of the axis's size): the op's SBP rule
    (none for random ops) and the all-broadcast one."""
    sigs = []
    if op.sbp_fn is not None and not op.random:
        sigs = [s if isinstance(s, Sig) else Sig(*s) for s in op.sbp_fn(inputs, attrs)]
    sigs.append(Sig((B,) * len(inputs), (B,) * n_out))
    return sigs


@functools.lru_cache(maxsize=256)
def axis_placement(pl: placement, axis: int) -> placement:
    """A 1-D placement of the size of ``pl``'s hierarchy axis ``axis`` (its first group along
    it): what the 1-D rules of that axis see as their inputs' placement."""
    return placement(pl.type, list(group_ranks(pl, (0,) * len(pl.hierarchy), axis)))


def _proxy(shape: tuple, dtype, sbp: tuple, pl: placement):
    # late: the handle lives in global_tensor, which imports this module
    from actorflow.dispatch.global_tensor import wrap
    return wrap(None, pl, (SbpParallel.from_attr(sbp),), shape, dtype)


def _expand(op, metas: list, sbps: list, attrs: dict, hier: tuple, n_out: int, pl: placement,
            inputs: list | None) -> list:
    n = hier[0]
    if inputs is None:
        level = axis_placement(pl, len(pl.hierarchy) - len(hier))
        inputs = [_proxy(m[0], m[1], s[0], level) for m, s in zip(metas, sbps)]
    sigs = []
    for s in rule_signatures(op, inputs, attrs, n_out):
        if len(s.ins) != len(metas) or len(s.outs) != n_out:
            raise registry.OpError(f"{op.name}: its SBP rule gave a signature of "
                                   f"{len(s.ins)} inputs and {len(s.outs)} outputs for a "
                                   f"call with {len(metas)} and {n_out}")
        if len(hier) == 1:
            sigs.append(NdSig(tuple((x,) for x in s.ins), tuple((x,) for x in s.outs),
                              lambda coords, s=s: [s]))
            continue
        per_group = []
        for i in range(n):
            sub_metas = [(shard_shape(m[0], x, n, i), m[1]) for m, x in zip(metas, s.ins)]
            sub_attrs = attrs if s.local is None else s.local(attrs, i, n)
            sub = _expand(op, sub_metas, [x[1:] for x in sbps], sub_attrs, hier[1:], n_out,
                          pl, None)
            table: dict = {}
            for nd in sub:
                table.setdefault((nd.ins, nd.outs), nd.levels)
            per_group.append(table)
        for key in per_group[0]:
            if all(key in g for g in per_group[1:]):
                ins = tuple((x,) + rest for x, rest in zip(s.ins, key[0]))
                outs = tuple((x,) + rest for x, rest in zip(s.outs, key[1]))
                sigs.append(NdSig(ins, outs, lambda coords, s=s, pg=per_group, key=key:
                                  [s] + pg[coords[0]][key](coords[1:])))
    return sigs


def signatures(op, metas: list, sbps: list, attrs: dict, pl: placement, n_out: int,
               inputs: list | None = None) -> list:
    """Every n-d signature of a call of ``op`` on inputs of ``metas`` (``(shape, dtype)``)
    laid out as ``sbps`` (n-d attr tuples) on ``pl``. ``inputs``: the global tensors
    themselves, which 1-D rules then see (saves making stand-ins)."""
    if len(pl.hierarchy) != 1:
        inputs = None
    return _expand(op, metas, sbps, attrs, pl.hierarchy, n_out, pl, inputs)


def select_signature(op, metas: list, sbps: list, attrs: dict, pl: placement, n_out: int,
                     fixed_ins: dict | None = None, out_sbps: list | None = None,
                     inputs: list | None = None) -> NdSig | None:
    """The n-d signature that moves the fewest bytes for a call of ``op`` (see
    ``signatures``); ``fixed_ins`` ``{input index: n-d sbp}`` and ``out_sbps`` keep only those
    that leave written tensors as they are. None when no signature is left."""
    best, best_cost = None, None
    nbytes = [math.prod(m[0]) * m[1].itemsize for m in metas]
    hier = pl.hierarchy
    if len(hier) == 1 and inputs is not None:
        return _select_1d(op, nbytes, sbps, attrs, n_out, fixed_ins, out_sbps, inputs)
    for sig in signatures(op, metas, sbps, attrs, pl, n_out, inputs):
        if fixed_ins and any(sig.ins[i] != s for i, s in fixed_ins.items()):
            continue
        if out_sbps is not None and any(o != s for o, s in zip(out_sbps, sig.outs)):
            continue
        cost = 0.0
        for size, cur, want in zip(nbytes, sbps, sig.ins):
            if cur != want:
                cost += box_cost(cur, want, size, hier)
        if best is None or cost < best_cost:
            best, best_cost = sig, cost
    return best


def _select_1d(op, nbytes: list, sbps: list, attrs: dict, n_out: int, fixed_ins, out_sbps,
               inputs: list) -> NdSig | None:
    """select_signature on a 1-D placement, ordered as OneFlow orders a 1-D op's signatures
    first: by how many inputs it takes as they are; then by the bytes boxing the others moves
    (``_cost_1d``: a broadcast input re-laid out locally costs almost nothing, where OneFlow's
    ordering cost ranks it above moving a split tensor - see docs/oneflow_tests.md), then by
    the rule's own order (the all-broadcast signature last)."""
    cur = [s[0] for s in sbps]
    fixed = {} if not fixed_ins else {i: s[0] for i, s in fixed_ins.items()}
    outs = None if out_sbps is None else [s[0] for s in out_sbps]
    best, best_key = None, None
    for sig in rule_signatures(op, inputs, attrs, n_out):
        if len(sig.ins) != len(inputs) or len(sig.outs) != n_out:
            raise registry.OpError(f"{op.name}: its SBP rule gave a signature of "
                                   f"{len(sig.ins)} inputs and {len(sig.outs)} outputs for a "
                                   f"call with {len(inputs)} and {n_out}")
        if any(sig.ins[i] != s for i, s in fixed.items()):
            continue
        if outs is not None and any(o != s for o, s in zip(outs, sig.outs)):
            continue
        kept = sum(c == want for c, want in zip(cur, sig.ins))
        cost = sum(_cost_1d(c, want, size) for size, c, want in zip(nbytes, cur, sig.ins))
        key = (-kept, cost)
        if best is None or key < best_key:
            best, best_key = sig, key
    if best is None:
        return None
    return NdSig(tuple((x,) for x in best.ins), tuple((x,) for x in best.outs),
                 lambda coords, s=best: [s])


def run_levels(levels: list, attrs: dict, coords: tuple, hierarchy: tuple) -> tuple:
    """The attrs of the call on this rank's shards and a function applying the levels' ``post``
    fix-ups (innermost first) to the local results."""
    chain = [attrs]
    for s, c, n in zip(levels, coords, hierarchy):
        chain.append(chain[-1] if s.local is None else s.local(chain[-1], c, n))

    def post(outs: list) -> list:
        for k in range(len(levels) - 1, -1, -1):
            if levels[k].post is not None:
                outs = levels[k].post(outs, chain[k], coords[k], hierarchy[k])
        return outs
    return chain[-1], post
