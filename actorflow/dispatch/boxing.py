"""Boxing: every change of a global tensor's SBP, eager and traced, decided and issued here.

``box_shard`` is the entry point: this rank's shard of a logical tensor laid out as n-d ``src``
on a placement, re-laid out as n-d ``dst``. It changes one hierarchy axis at a time
(``box_plan``) with the 1-D boxing ops (``box_1d``, on the group along that axis,
``box_axis``), which are ops of the registry (``actorflow.ops.boxing``: their kernels and
gradients). Changing axis ``k`` is exact when no inner axis splits a dim that axis ``k``'s
source or target splits (the 1-D ops are linear and commute with slicing other dims); inner
axes that would conflict are first gathered to broadcast (innermost first), then every axis is
boxed to its target, outermost first. ``box_cost`` estimates the bytes a boxing moves (what
the signature choice of ``actorflow.dispatch.nd_sbp`` minimises).

The functions issue the boxing ops eagerly by default (on the VM's communication worker when
they move data); given ``interp`` (a Graph's tracer, see ``actorflow.dispatch.lazy_global``, or
the meta interpreter for shape-only placements) and ``extra`` attrs (the graph's communicator),
they apply the same ops there instead, so eager global tensors and a traced Job box alike. SBPs
are in the attr form of ``actorflow.framework.sbp_parallel``.
"""
from __future__ import annotations

from actorflow import vm
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import B, M, P, group_ranks, nd_shard_shape
from actorflow.ops import registry

_EAGER = EagerInterpreter()


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


def cost_1d(src: tuple, dst: tuple, nbytes: float) -> float:
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
            cost += cost_1d(s, d, part)
    return cost
