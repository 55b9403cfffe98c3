"""N-d SBP signatures: the choice of an op call's signature on a placement with a hierarchy
of rank axes (n-d SBPs in the attr form of ``actorflow.framework.sbp_parallel``; the layout is
its ``nd_shard_shape``, nested as OneFlow's; boxing between them is
``actorflow.dispatch.boxing``).

The signature of an op call is one 1-D signature per axis, chosen by the op's own 1-D rule: the
rule of axis 0 sees the logical tensors; for each of its signatures, the rule of axis 1 sees
the parts a group holds (shapes and attrs as the axis-0 signature's ``local`` gives them), and
so on. A signature is kept only when every group admits it, so all ranks agree; each group then
runs its own ``local``/``post`` functions. ``select_signature`` keeps the one whose boxing of
the inputs moves the fewest bytes (``boxing.box_cost``).
"""
from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

from actorflow.dispatch.boxing import box_cost
from actorflow.dispatch.boxing import cost_1d as _cost_1d  # (the 1-D choice's cost)
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import (
    B,
    SbpParallel,
    group_ranks,
    shard_shape,
)
from actorflow.ops import registry
from actorflow.ops.boxing import Sig


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
