"""Helpers shared by the op families: broadcasting, axis handling, and ``F``.

``F`` is the functional API, imported on first use: gradient rules call functional ops so that
they run eagerly or emit lazy ops while a Graph traces.
"""
from __future__ import annotations

import importlib

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.registry import Meta, fail


class _Functional:
    """Late-bound ``actorflow.functional`` (the registry is below it in the layering)."""

    def __getattr__(self, name):
        value = getattr(importlib.import_module("actorflow.functional"), name)
        setattr(self, name, value)
        return value


F = _Functional()


def broadcast_shapes(op_name: str, *shapes) -> tuple:
    """NumPy/PyTorch broadcasting of shapes; an error names the op and the shapes."""
    first = shapes[0]
    if len(shapes) == 2 and shapes[1] == first:  # the common case, without the loop
        return tuple(first)
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = d
            elif d != 1 and d != o:
                fail(op_name, f"shapes cannot be broadcast together: size {d} vs {o} at "
                     f"dimension {off + i - ndim}", *shapes)
    return tuple(out)


def promote(inputs, scalars=()) -> dt.dtype:
    """Result dtype of an elementwise op over tensors ``inputs`` and Python ``scalars``."""
    dims = [t.dtype for t in inputs if t._shape]
    zero = [t.dtype for t in inputs if not t._shape]
    return dt.result_type(dims, zero, scalars)


def norm_axis(op_name: str, axis: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= axis < n:
        fail(op_name, f"dim {axis} is out of range for a tensor of {ndim} dims")
    return axis % n


def norm_axes(op_name: str, axes, ndim: int) -> tuple:
    """Normalise ``None`` (all), an int, or a sequence of ints into a sorted tuple of axes."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    res = tuple(sorted({norm_axis(op_name, a, ndim) for a in axes}))
    return res


def same_meta(x) -> list:
    return [Meta(x._shape, x.dtype)]


def copy_reshaped(x: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = x`` with ``x``'s elements (in C order) laid out in ``out``'s shape: one
    copy (``x.reshape`` of a non-contiguous ``x`` would copy once more)."""
    if out.flags.c_contiguous:
        np.copyto(out.reshape(x.shape), x)
    else:
        out[...] = x.reshape(out.shape)
