"""Discrete Fourier transforms: the three ops every ``flow.fft`` function is built from.

- ``fft_c2c``: complex -> complex over ``dims`` (``forward``: the exp(-2 pi i jk/n) direction).
- ``fft_r2c``: real -> complex, forward direction; ``onesided`` keeps the last dim's first
  ``n // 2 + 1`` frequencies (the others are their conjugates).
- ``fft_c2r``: a one-sided Hermitian half -> real, inverse direction; the last dim becomes
  ``last_dim_size``.

``norm`` says what a transform divides by: ``"none"``, ``"sqrt"`` (the square root of the signal
size) or ``"n"`` (the signal size), the signal size being the product of the real side's sizes
over ``dims``. The functional layer (``functional/fft.py``) maps the user's ``norm`` strings,
resizes inputs (``n``/``s``) and conjugates (``ifft`` of a real input, ``hfft``, ``ihfft``), as
PyTorch does. Kernels run NumPy's pocketfft in double precision and round to the output's
precision. Gradient rules follow PyTorch's formulas (the adjoint transform), written with these
ops, so they can be differentiated again.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F
from actorflow.ops.registry import Meta, fail, register

NORMS = ("none", "sqrt", "n")
# numpy's norm argument giving our scaling: forward transforms, inverse transforms
_NP_FORWARD = {"none": "backward", "sqrt": "ortho", "n": "forward"}
_NP_INVERSE = {"none": "forward", "sqrt": "ortho", "n": "backward"}


def complex_of(d: dt.dtype) -> dt.dtype:
    """The complex dtype holding floating dtype ``d`` (float64: complex128, else complex64)."""
    return dt.complex128 if d is dt.float64 or d is dt.complex128 else dt.complex64


def real_of(d: dt.dtype) -> dt.dtype:
    """The floating dtype of a complex dtype's parts."""
    return dt.float64 if d is dt.complex128 else dt.float32


def _check(name: str, x, attrs: dict) -> tuple:
    dims = tuple(attrs["dims"])
    nd = len(x._shape)
    if not dims or len(set(dims)) != len(dims) or any(not 0 <= d < nd for d in dims):
        fail(name, f"dims must be distinct dims of a {nd}-D input, got {dims}", x._shape)
    if attrs["norm"] not in NORMS:
        fail(name, f"norm must be one of {NORMS}, got {attrs['norm']!r}", x._shape)
    if any(x._shape[d] < 1 for d in dims):
        fail(name, f"invalid number of data points along dims {dims}", x._shape)
    return dims


fft_c2c = register("fft_c2c", doc="Complex-to-complex DFT of input 0 over attr dims; attrs "
                   "norm ('none'/'sqrt'/'n': divide by 1, sqrt(n), n) and forward (bool).")


@fft_c2c.infer
def _(inputs, attrs):
    x = inputs[0]
    _check("fft_c2c", x, attrs)
    if not x.dtype.is_complex:
        fail("fft_c2c", f"expects a complex input, got {x.dtype}", x._shape)
    return [Meta(tuple(x._shape), x.dtype)]


@fft_c2c.kernel("cpu")
def _(ins, outs, attrs):
    dims = tuple(attrs["dims"])
    if attrs["forward"]:
        r = np.fft.fftn(ins[0], axes=dims, norm=_NP_FORWARD[attrs["norm"]])
    else:
        r = np.fft.ifftn(ins[0], axes=dims, norm=_NP_INVERSE[attrs["norm"]])
    np.copyto(outs[0], r, casting="unsafe")


@fft_c2c.grad
def _(ctx, dout):
    a = ctx.attrs
    return [F.fft_c2c(dout, a["dims"], a["norm"], not a["forward"])]


fft_r2c = register("fft_r2c", doc="Real-to-complex forward DFT of input 0 over attr dims; "
                   "attrs norm (as fft_c2c) and onesided (keep n // 2 + 1 of the last dim).")


@fft_r2c.infer
def _(inputs, attrs):
    x = inputs[0]
    dims = _check("fft_r2c", x, attrs)
    if x.dtype not in (dt.float32, dt.float64):
        fail("fft_r2c", f"expects a float32 or float64 input, got {x.dtype}", x._shape)
    shape = list(x._shape)
    if attrs["onesided"]:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    return [Meta(tuple(shape), complex_of(x.dtype))]


@fft_r2c.kernel("cpu")
def _(ins, outs, attrs):
    dims, norm = tuple(attrs["dims"]), _NP_FORWARD[attrs["norm"]]
    if attrs["onesided"]:
        r = np.fft.rfftn(ins[0], axes=dims, norm=norm)
    else:
        r = np.fft.fftn(ins[0], axes=dims, norm=norm)
    np.copyto(outs[0], r, casting="unsafe")


@fft_r2c.grad
def _(ctx, dout):
    a = ctx.attrs
    dims = tuple(a["dims"])
    g = dout
    if a["onesided"]:  # the dropped frequencies got no gradient: zeros
        last = dims[-1]
        full = ctx.input_metas[0][0][last]
        pads = [0, 0] * (len(g._shape) - 1 - last) + [0, full - g._shape[last]]
        g = F.pad(g, pads)
    return [F.real(F.fft_c2c(g, dims, a["norm"], False))]


fft_c2r = register("fft_c2r", doc="One-sided complex-to-real inverse DFT of input 0 over attr "
                   "dims; attrs norm (as fft_c2c, of the output's sizes) and last_dim_size.")


@fft_c2r.infer
def _(inputs, attrs):
    x = inputs[0]
    dims = _check("fft_c2r", x, attrs)
    if not x.dtype.is_complex:
        fail("fft_c2r", f"expects a complex input, got {x.dtype}", x._shape)
    n = int(attrs["last_dim_size"])
    if n < 1 or x._shape[dims[-1]] != n // 2 + 1:
        fail("fft_c2r", f"last_dim_size {n} needs {n // 2 + 1} entries along dim {dims[-1]}",
             x._shape)
    shape = list(x._shape)
    shape[dims[-1]] = n
    return [Meta(tuple(shape), real_of(x.dtype))]


@fft_c2r.kernel("cpu")
def _(ins, outs, attrs):
    dims = tuple(attrs["dims"])
    s = [ins[0].shape[d] for d in dims[:-1]] + [int(attrs["last_dim_size"])]
    r = np.fft.irfftn(ins[0], s=s, axes=dims, norm=_NP_INVERSE[attrs["norm"]])
    np.copyto(outs[0], r, casting="unsafe")


@fft_c2r.grad
def _(ctx, dout):
    a = ctx.attrs
    dims = tuple(a["dims"])
    last = dims[-1]
    g = F.fft_r2c(dout, dims, a["norm"], True)
    # the frequencies that stand for two (themselves and their conjugates) count twice
    twice = dout._shape[last] - g._shape[last]
    if twice > 0:
        rest = g._shape[last] - 1 - twice
        parts = [F.narrow(g, last, 0, 1), F.mul(F.narrow(g, last, 1, twice), 2.0)]
        if rest > 0:
            parts.append(F.narrow(g, last, 1 + twice, rest))
        g = F.cat(parts, last)
    return [g]
