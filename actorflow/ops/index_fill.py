"""``index_fill``: the input with every element at ``index`` along ``dim`` set to a number.

Inputs ``(x, index)`` (``index`` a 0-d or 1-d integer tensor; duplicates allowed, negative
indices count from the end as in PyTorch), attrs ``dim`` and ``value``. Its gradient is the
output gradient with the filled positions zeroed (an index_fill with 0); a tensor ``value``
is a composition in the functional API. A split along another dim than ``dim`` stays split.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, norm_axis
from actorflow.ops.boxing import B, S, Sig
from actorflow.ops.index import saved_index_inputs
from actorflow.ops.int_scalars import int_scalar
from actorflow.ops.registry import Meta, fail, register

index_fill = register("index_fill",
                      doc="x with the elements at index (input 1, 0-d or 1-d integer) along "
                          "attr dim set to attr value.")


@index_fill.infer
def _(inputs, attrs):
    x, index = inputs
    if index.dtype._category != 1 or len(index._shape) > 1:
        fail("index_fill", f"index must be a 0-d or 1-d integer tensor, got {index.dtype} of "
             f"{len(index._shape)} dims", x._shape, index._shape)
    norm_axis("index_fill", attrs["dim"], len(x._shape))
    if isinstance(attrs["value"], complex) and not x.dtype.is_complex:
        fail("index_fill", f"a complex value can't fill a {x.dtype} tensor", x._shape)
    return [Meta(x._shape, x.dtype)]


@index_fill.sbp
def _(inputs, attrs):
    nd = len(inputs[0]._shape)
    dim = attrs["dim"] % max(nd, 1)
    for d in range(nd):
        if d != dim:
            yield Sig((S(d), B), (S(d),))


@index_fill.kernel("cpu")
def _(ins, outs, attrs):
    x, index = ins
    out = outs[0]
    if out is not x:
        np.copyto(out, x)
    if x.ndim == 0:
        if index.size and not np.all((index.reshape(-1) == 0) | (index.reshape(-1) == -1)):
            raise IndexError(f"index_fill: index {int(index.reshape(-1)[0])} is out of range "
                             f"for a 0-d tensor")
        if index.size:
            out[...] = _value(attrs["value"], out.dtype)
        return
    dim = norm_axis("index_fill", attrs["dim"], x.ndim)
    size = x.shape[dim]
    idx = index.reshape(-1).astype(np.int64)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -size or hi >= size:
            bad = lo if lo < -size else hi
            raise IndexError(f"index_fill: index {bad} is out of range for dimension {dim} "
                             f"with size {size}")
    out[(slice(None),) * dim + (idx,)] = _value(attrs["value"], out.dtype)


def _value(v, dtype: np.dtype):
    """The fill value in ``dtype`` (an integral number wraps as PyTorch's integer casts)."""
    if dtype.kind in "iu" and not isinstance(v, float):
        return int_scalar(v, dtype)
    return np.asarray(v).astype(dtype)


@index_fill.grad
def _(ctx, dout):
    index = saved_index_inputs(ctx, 1)[0]  # x itself is not read: it may change later
    return F.call("index_fill", dout, index, dim=ctx.attrs["dim"], value=0), None
