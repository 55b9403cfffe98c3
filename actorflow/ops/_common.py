"""Helpers shared by the op families: broadcasting, axis handling, ``F`` and ``autograd``.

``F`` is the functional API, imported on first use: gradient rules call functional ops so that
they run eagerly or emit lazy ops while a Graph traces (the autograd engine reaches the
functional API through it too). ``autograd`` is the autograd package, imported on first use:
the few double-backward rules that differentiate a composite of functional ops call its
``grad`` and grad mode. These two are the op layer's late bindings (``tests/test_layers.py``
allows them).
"""
from __future__ import annotations

import importlib

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.registry import fail
from actorflow.process import watchdog


class _Functional:
    """Late-bound ``actorflow.functional`` (the registry is below it in the layering)."""

    def __getattr__(self, name):
        value = getattr(importlib.import_module("actorflow.functional"), name)
        setattr(self, name, value)
        return value


F = _Functional()


class _Autograd:
    """Late-bound ``actorflow.autograd`` (the registry is below it in the layering)."""

    def __getattr__(self, name):
        value = getattr(importlib.import_module("actorflow.autograd"), name)
        setattr(self, name, value)
        return value


autograd = _Autograd()


def comm_wait(request, what: str, detail, attrs: dict, keep) -> None:
    """Complete the non-blocking MPI ``request`` of a collective or transfer kernel through
    ``process.watchdog.wait`` (``detail``: a callable naming the shapes; ``keep``: the
    buffers in use); a graph's (attr ``group``) raises if another rank's call failed."""
    watchdog.wait(request, what, detail, attrs.get("group"), keep)


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


def copy_reshaped(x: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = x`` with ``x``'s elements (in C order) laid out in ``out``'s shape: one
    copy (``x.reshape`` of a non-contiguous ``x`` would copy once more)."""
    if out.flags.c_contiguous:
        np.copyto(out.reshape(x.shape), x)
    else:
        out[...] = x.reshape(out.shape)


_BLAS_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
HALF_DTYPES = {np.dtype(np.float16)}  # hashed: ~25 ns; bfloat16's joins once it is loaded
dt.on_numpy_type_loaded(lambda d: HALF_DTYPES.add(d.np))


def acc_dtype(d: np.dtype) -> np.dtype:
    """The dtype to accumulate a reduction or scan of ``d`` in: float32 for float16/bfloat16
    (as PyTorch does), ``d`` itself otherwise."""
    return np.dtype(np.float32) if d in HALF_DTYPES else d


def in_float32(fn, x: np.ndarray, out: np.ndarray, *args) -> None:
    """Run the reduction or scan ``fn(x, out, *args)`` for a float16/bfloat16 ``out`` on a
    float32 copy of ``x`` into a float32 temporary, rounded once into ``out``, as PyTorch
    accumulates half precision (summing thousands of values in half precision stalls: bfloat16
    0.1 + 0.1 + ... stops growing at 32). Kernels test ``out.dtype in HALF_DTYPES`` first, so
    their float32/float64 paths pay no extra call."""
    acc = np.empty(out.shape, np.float32)
    fn(x.astype(np.float32, copy=False), acc, *args)
    with np.errstate(over="ignore"):  # out of float16's range: inf, as PyTorch gives
        np.copyto(out, acc, casting="unsafe")


def ones_vector(n: int, dtype) -> np.ndarray:
    """A read-only vector of ``n`` ones; vectors up to 64k elements are kept for reuse."""
    key = (n, dtype)
    v = _ONES.get(key)
    if v is None:
        v = np.ones(n, dtype)
        v.flags.writeable = False
        if n <= 1 << 16:
            if len(_ONES) >= 64:
                _ONES.clear()
            _ONES[key] = v
    return v


_ONES: dict = {}


def add_at(out: np.ndarray, index, values) -> None:
    """``np.add.at(out, index, values)`` (repeated indices accumulate); a float16/bfloat16
    ``out`` accumulates in float32 and is rounded once."""
    if out.dtype not in HALF_DTYPES:
        np.add.at(out, index, values)
        return
    acc = out.astype(np.float32)
    np.add.at(acc, index, np.asarray(values).astype(np.float32, copy=False))
    with np.errstate(over="ignore"):
        np.copyto(out, acc, casting="unsafe")


def is_floating(d: np.dtype) -> bool:
    """Whether the NumPy dtype ``d`` is a floating type (bfloat16 included: its kind is 'V')."""
    return d.kind == "f" or d in HALF_DTYPES


def blas_sum(x: np.ndarray, axes: tuple, out: np.ndarray) -> bool:
    """``out = x.sum(axes)`` as a matrix-vector product with a vector of ones when ``axes`` are
    the leading or the trailing dims of a C-contiguous float32/float64 ``x`` (and ``out`` is a
    contiguous array of x's dtype holding the kept dims); True if done, False when it does not
    apply. NumPy sums leading axes one row at a time and short trailing rows with a loop call
    per row: BLAS is 3-4x faster on (2048, 64..256), e.g. a bias gradient. Leading axes lose no
    accuracy (NumPy adds those rows in sequence too); trailing rows are only taken up to 1024
    long, where NumPy's pairwise summation is no more accurate than BLAS's blocked dot."""
    nd = x.ndim
    if x.dtype not in _BLAS_FLOATS or out.dtype != x.dtype or not axes or len(axes) == nd \
            or not x.flags.c_contiguous or not out.flags.c_contiguous or x.size == 0:
        return False
    k = len(axes)
    if axes == tuple(range(k)):
        m = 1
        for a in axes:
            m *= x.shape[a]
        np.matmul(ones_vector(m, x.dtype), x.reshape(m, -1), out=out.reshape(-1))
        return True
    if axes == tuple(range(nd - k, nd)):
        n = 1
        for a in axes:
            n *= x.shape[a]
        if n > 1024:
            return False
        np.matmul(x.reshape(-1, n), ones_vector(n, x.dtype), out=out.reshape(-1))
        return True
    return False


def sum_keepdim(a: np.ndarray, dim: int | None) -> np.ndarray:
    """``a.sum(axis=dim, keepdims=True)``; along the last dim of a contiguous float32/float64
    array as a BLAS matrix-vector product (``blas_sum``), the row sums of softmax-like ops."""
    if dim is not None and dim == a.ndim - 1:
        out = np.empty(a.shape[:-1] + (1,), a.dtype)
        if blas_sum(a, (dim,), out):
            return out
    return a.sum(axis=dim, keepdims=True)
