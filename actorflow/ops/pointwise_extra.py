"""Pointwise ops of OneFlow's API beyond the arithmetic families: ``lerp`` (start + weight *
(end - start), weight a tensor) and ``scalar_lerp`` (weight an attr), and ``frac`` (x minus
its integer part, the sign kept).

lerp computes as PyTorch does, from the nearer end: ``start + w * (end - start)`` for
``|w| < 0.5``, else ``end - (end - start) * (1 - w)``, so ``w = 1`` gives ``end`` exactly.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, broadcast_shapes, is_floating, promote
from actorflow.ops.boxing import elementwise_rule, linear_rule
from actorflow.ops.elementwise import no_complex, unary
from actorflow.ops.registry import Meta, fail, register


def _lerp_into(start, end, w, out) -> None:
    diff = np.subtract(end, start, dtype=out.dtype, casting="unsafe")
    near = np.abs(w) < 0.5
    res = np.where(near, start + w * diff, end - diff * (1 - w))
    np.copyto(out, res, casting="unsafe")


def _lerp_infer(name: str):
    def infer(inputs, attrs):
        shapes = [t._shape for t in inputs]
        shape = broadcast_shapes(name, *shapes)
        d = promote(inputs, () if len(inputs) == 3 else (attrs["weight"],))
        no_complex(name, d, *shapes)
        if not is_floating(d.np):
            fail(name, f"expected floating-point tensors, got {d}", *shapes)
        return [Meta(shape, d)]
    return infer


lerp = register("lerp", elementwise=True, alias_safe=True,
                doc="start + weight * (end - start) elementwise (inputs start, end, weight; "
                    "broadcasting), from the nearer end as PyTorch computes it.")
lerp.infer(_lerp_infer("lerp"))
lerp.sbp(elementwise_rule)


@lerp.kernel("cpu")
def _(ins, outs, attrs):
    start, end, w = ins
    _lerp_into(start, end, w.astype(outs[0].dtype, copy=False), outs[0])


@lerp.grad
def _(ctx, dout):
    start, end, w = ctx.inputs
    (s0, _), (s1, _), (s2, _) = ctx.input_metas
    need = ctx.needs_input_grad
    return (F.sum_to(F.mul(dout, F.rsub(w, 1)), s0) if need[0] else None,
            F.sum_to(F.mul(dout, w), s1) if need[1] else None,
            F.sum_to(F.mul(dout, F.sub(end, start)), s2) if need[2] else None)


scalar_lerp = register("scalar_lerp", elementwise=True, alias_safe=True,
                       doc="start + weight * (end - start) elementwise with attr weight (a "
                           "number); inputs start, end (broadcasting).")
scalar_lerp.infer(_lerp_infer("scalar_lerp"))
scalar_lerp.sbp(linear_rule)  # linear in (start, end) together: partial sums stay partial


@scalar_lerp.kernel("cpu")
def _(ins, outs, attrs):
    _lerp_into(ins[0], ins[1], np.asarray(attrs["weight"], outs[0].dtype), outs[0])


@scalar_lerp.grad
def _(ctx, dout):
    w = float(ctx.attrs["weight"])
    (s0, _), (s1, _) = ctx.input_metas
    return F.sum_to(F.mul(dout, 1.0 - w), s0), F.sum_to(F.mul(dout, w), s1)


def _frac(x, out, attrs):
    np.copyto(out, x - np.trunc(x), casting="unsafe")


frac = unary("frac", _frac, grad=lambda ctx, g: g)
