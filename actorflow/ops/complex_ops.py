"""Complex numbers to real ones: ``complex_abs`` (``abs`` of a complex tensor) and ``angle``.

Gradients follow PyTorch's convention for a real function of a complex input (the conjugate
Wirtinger derivative, ``dL/dx + i dL/dy``): ``abs``: ``g z / |z|``; ``angle``:
``g i z / |z|^2``; both 0 at ``z = 0``. ``angle`` of a real tensor is 0 or pi (NaN stays NaN),
with a zero gradient.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F
from actorflow.ops.boxing import elementwise_rule
from actorflow.ops.registry import Meta, fail, register


def _real_of(d):
    return dt.float64 if d is dt.complex128 else dt.float32


complex_abs = register("complex_abs", doc="|z| of a complex tensor (a float tensor of its "
                                          "precision).")
complex_abs.sbp(elementwise_rule)


@complex_abs.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x.dtype.is_complex:
        fail("complex_abs", f"expects a complex tensor, got {x.dtype}", x._shape)
    return [Meta(x._shape, _real_of(x.dtype))]


@complex_abs.kernel("cpu")
def _(ins, outs, attrs):
    np.abs(ins[0], out=outs[0], casting="unsafe")


def _safe(r):
    """``r`` with its zeros replaced by ones (the gradients are 0 there)."""
    return F.where(F.eq(r, 0), 1.0, r)


@complex_abs.grad
def _(ctx, g):
    z = ctx.inputs[0]
    r = _safe(F.call("complex_abs", z))
    return F.mul(F.div(z, r), g)


angle = register("angle", doc="The argument atan2(imag, real) of each element (a real input: 0 "
                              "or pi); a float tensor.")
angle.sbp(elementwise_rule)


@angle.infer
def _(inputs, attrs):
    x = inputs[0]
    if x.dtype.is_complex:
        return [Meta(x._shape, _real_of(x.dtype))]
    return [Meta(x._shape, x.dtype if x.dtype.is_floating_point else dt.get_default_dtype())]


@angle.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    if x.dtype.kind == "c":
        np.copyto(outs[0], np.angle(x), casting="unsafe")
        return
    v = np.asarray(x, np.float64)
    np.copyto(outs[0], np.where(np.isnan(v), np.nan, np.where(v < 0, math.pi, 0.0)),
              casting="unsafe")


@angle.grad
def _(ctx, g):
    z = ctx.inputs[0]
    if not z.dtype.is_complex:
        return F.mul(g, 0.0)
    r = _safe(F.call("complex_abs", z))
    return F.mul(F.div(F.mul(z, 1j), F.mul(r, r)), g)
