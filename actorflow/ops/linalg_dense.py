"""Dense square-matrix ops over the last two dims (batched): ``det`` and ``inv``.

LAPACK through NumPy, computed in float64 for float16/float32 inputs' stability only when
NumPy would not support the dtype; gradients are written with functional ops:
``d inv(A) = -inv(A)^T dY inv(A)^T`` and ``d det(A) = dY det(A) inv(A)^T``.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.boxing import S, Sig
from actorflow.ops.registry import Meta, fail, register


def _square(name: str, x) -> tuple:
    s = tuple(x._shape)
    if len(s) < 2 or s[-1] != s[-2]:
        fail(name, f"expected a (batch of) square matrix, got shape {s}", s)
    if not x.dtype.is_floating_point:
        fail(name, f"expected a floating point input, got {x.dtype}", s)
    return s


def _compute(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype.itemsize < 4 else a


inv = register("inv", grad_uses_outputs=True, amp="deny",
               doc="Inverse of each square matrix in the last two dims (input A).")


@inv.infer
def _(inputs, attrs):
    x = inputs[0]
    return [Meta(_square(inv.name, x), x.dtype)]


@inv.sbp
def _(inputs, attrs):
    """As OneFlow: split along any batch dim (each matrix is inverted alone)."""
    for d in range(len(inputs[0]._shape) - 2):
        yield Sig((S(d),), (S(d),))


@inv.kernel("cpu")
def _(ins, outs, attrs):
    a = _compute(ins[0])
    if a.size == 0:
        return
    try:
        outs[0][...] = np.linalg.inv(a)
    except np.linalg.LinAlgError as e:
        raise ValueError(f"inv: the input of shape {a.shape} is not invertible ({e})") from None


@inv.grad
def _(ctx, dout):
    y_t = F.transpose(ctx.outputs[0], -2, -1)
    return [F.neg(F.matmul(F.matmul(y_t, dout), y_t))]


det = register("det", amp="deny",
               doc="Determinant of each square matrix in the last two dims (input A).")


@det.infer
def _(inputs, attrs):
    x = inputs[0]
    return [Meta(_square(det.name, x)[:-2], x.dtype)]


@det.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.linalg.det(_compute(ins[0]))


@det.grad
def _(ctx, dout):
    a = ctx.inputs[0]
    scale = F.unsqueeze(F.unsqueeze(F.mul(dout, F.det(a)), -1), -1)
    return [F.mul(scale, F.transpose(F.inv(a), -2, -1))]
