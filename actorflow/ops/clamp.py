"""Clamping: ``clamp`` (number bounds) and ``clamp_tensor`` (tensor bounds, broadcasting), and
``clamp_into``, the kernel hardtanh shares. Either bound may be missing; the gradient passes
where ``min <= x <= max``, and a bound tensor's gradient where that bound wins (PyTorch's
rule)."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, broadcast_shapes, promote
from actorflow.ops.boxing import elementwise_rule
from actorflow.ops.elementwise import _needs, bf16_safe, no_complex
from actorflow.ops.int_scalars import check_int_scalar, int_scalar
from actorflow.ops.registry import Meta, register

clamp = register("clamp", elementwise=True, alias_safe=True,
                 doc="Clamp to [min, max]; either bound (a number) may be None.")


@clamp.infer
def _(inputs, attrs):
    x = inputs[0]
    bounds = [b for b in (attrs["min"], attrs["max"]) if b is not None]
    if not bounds:
        raise ValueError("at least one of min and max must be given")
    d = dt.result_type([x.dtype], (), bounds)
    no_complex("clamp", d, x._shape)
    for b in bounds:  # an integral bound must be representable in an integer result (PyTorch)
        check_int_scalar("clamp", b, d, exact=True)
    return [Meta(x._shape, d)]


_safe_maximum, _safe_minimum = bf16_safe(np.maximum), bf16_safe(np.minimum)


def clamp_into(out, x, lo, hi) -> None:
    """``out = min(max(x, lo), hi)``; a bound may be None (used by clamp and hardtanh)."""
    if lo is not None:
        _safe_maximum(x, lo, out=out, dtype=out.dtype, casting="unsafe")
    else:
        np.copyto(out, x, casting="unsafe")
    if hi is not None:
        _safe_minimum(out, hi, out=out, dtype=out.dtype, casting="unsafe")


@clamp.kernel("cpu")
def _(ins, outs, attrs):
    out, lo, hi = outs[0], attrs["min"], attrs["max"]
    if out.dtype.kind in "iu":  # bounds were checked at inference; unsigned ones < 0 wrap
        lo, hi = int_scalar(lo, out.dtype), int_scalar(hi, out.dtype)
    clamp_into(out, ins[0], lo, hi)


@clamp.grad
def _(ctx, g):  # the gradient passes where min <= x <= max
    x, lo, hi = ctx.inputs[0], ctx.attrs["min"], ctx.attrs["max"]
    if lo is not None and hi is not None:
        inside = F.logical_and(F.ge(x, lo), F.le(x, hi))
    else:
        inside = F.ge(x, lo) if lo is not None else F.le(x, hi)
    return F.where(inside, g, 0.0)


clamp_tensor = register("clamp_tensor", elementwise=True, alias_safe=True,
                        doc="Clamp to tensor bounds (broadcasting); inputs are x, then min "
                            "and/or max as attrs has_min/has_max say.")


clamp.sbp(elementwise_rule)
clamp_tensor.sbp(elementwise_rule)


@clamp_tensor.infer
def _(inputs, attrs):
    if len(inputs) != 1 + bool(attrs["has_min"]) + bool(attrs["has_max"]) or len(inputs) < 2:
        raise ValueError("expected x and at least one bound tensor")
    shape = broadcast_shapes("clamp", *[t._shape for t in inputs])
    d = promote(inputs)
    no_complex("clamp", d, *[t._shape for t in inputs])
    return [Meta(shape, d)]


def _bounds(values: list, attrs: dict):
    lo = values[1] if attrs["has_min"] else None
    hi = values[-1] if attrs["has_max"] else None
    return values[0], lo, hi


@clamp_tensor.kernel("cpu")
def _(ins, outs, attrs):
    clamp_into(outs[0], *_bounds(ins, attrs))


@clamp_tensor.grad
def _(ctx, g):
    x, lo, hi = _bounds(ctx.inputs, ctx.attrs)
    metas = [m[0] for m in ctx.input_metas]
    grads = [None] * len(metas)
    if _needs(ctx, 0):
        inside = None
        if lo is not None:
            inside = F.ge(x, lo)
        if hi is not None:
            inside = F.le(x, hi) if inside is None else F.logical_and(inside, F.le(x, hi))
        grads[0] = F.sum_to(F.where(inside, g, 0.0), metas[0])
    if lo is not None and _needs(ctx, 1):  # min wins where x < min (and min < max)
        below = F.lt(x, lo) if hi is None else F.logical_and(F.lt(x, lo), F.lt(lo, hi))
        grads[1] = F.sum_to(F.where(below, g, 0.0), metas[1])
    if hi is not None and _needs(ctx, len(metas) - 1):  # max wins where x > max or max < min
        above = F.gt(x, hi) if lo is None else F.logical_or(F.gt(x, hi), F.lt(hi, lo))
        grads[-1] = F.sum_to(F.where(above, g, 0.0), metas[-1])
    return tuple(grads)
