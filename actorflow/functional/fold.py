"""Sliding windows: ``nn.functional.unfold`` / ``fold`` (image blocks as columns and back, the
ops ``im2col`` / ``col2im``) and ``Tensor.unfold(dimension, size, step)`` (windows of one dim).

The image functions are re-exported by ``actorflow.nn.functional`` only: ``flow.unfold`` is not
a top-level name (``Tensor.unfold`` means the windows of one dim, as in PyTorch).
"""
from __future__ import annotations

import numpy as np

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.framework.sbp_parallel import broadcast
from actorflow.functional.creation import tensor
from actorflow.functional.index import index_select
from actorflow.functional.shape import movedim, reshape
from actorflow.ops import registry
from actorflow.ops._common import norm_axis
from actorflow.ops.registry import fail
from actorflow.tensor import Tensor, register_tensor_methods

_im2col = registry.get("im2col")
_col2im = registry.get("col2im")


def _pair(name: str, v) -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise ValueError(f"{name}: expected an int or a pair, got {v}")
    return v


def _geometry(kernel_size, dilation, padding, stride) -> dict:
    return {"kernel_size": _pair("kernel_size", kernel_size),
            "dilation": _pair("dilation", dilation), "padding": _pair("padding", padding),
            "stride": _pair("stride", stride)}


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Blocks of a (N, C, H, W) (or (C, H, W)) image as columns (N, C*kh*kw, L)."""
    batched = len(input._shape) == 4
    x = input if batched else reshape(input, (1,) + tuple(input._shape))
    out = apply(_im2col, [x], _geometry(kernel_size, dilation, padding, stride))[0]
    return out if batched else reshape(out, tuple(out._shape[1:]))


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns (N, C*kh*kw, L) (or unbatched) into an image of ``output_size``; the
    adjoint of ``unfold``."""
    batched = len(input._shape) == 3
    x = input if batched else reshape(input, (1,) + tuple(input._shape))
    attrs = _geometry(kernel_size, dilation, padding, stride)
    attrs["output_size"] = _pair("output_size", output_size)
    out = apply(_col2im, [x], attrs)[0]
    return out if batched else reshape(out, tuple(out._shape[1:]))


def _unfold_method(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Windows of ``size`` entries every ``step`` along ``dimension``: that dim becomes the
    number of windows and a last dim of ``size`` is added (a copy here; PyTorch gives a view)."""
    shape = tuple(self._shape)
    d = norm_axis("unfold", dimension, len(shape)) if shape else 0
    n = shape[d] if shape else 1
    if size < 0 or size > n or step <= 0:
        fail("unfold", f"size {size} must be in [0, {n}] and step {step} positive for dim "
             f"{dimension}", shape)
    count = (n - size) // step + 1
    index = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    x = self if shape else reshape(self, (1,))
    if self.is_global:  # the window index: broadcast on the tensor's placement
        where = tensor(index.astype(np.int64), dtype=dt.int64, placement=self.placement,
                       sbp=(broadcast,) * len(self.sbp))
    else:
        where = Tensor._wrap(index.astype(np.int64), dt.int64)
    picked = index_select(x, d, where)
    picked = reshape(picked, tuple(x._shape[:d]) + (count, size) + tuple(x._shape[d + 1:]))
    out = movedim(picked, d + 1, -1)
    return out if shape else reshape(out, (size,))  # a 0-d tensor: one window


register_tensor_methods({"unfold": _unfold_method})

__all__: list = []
