"""Complex tensors as pairs of reals and back: ``view_as_real`` ((*,) complex -> (*, 2) real,
the last dim holding the real and imaginary parts) and ``view_as_complex`` (the inverse).

Unlike PyTorch's, both return copies: a view that changes the item size can't be followed by
the stride probes with which an nn.Graph trace and the Plan decide where a write through a view
lands (``job/views.py``), so a view here would make eager and graph results differ. Each one's
gradient is the other applied to the output gradient (PyTorch's convention for complex
gradients).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F
from actorflow.ops.boxing import P, S, Sig
from actorflow.ops.registry import Meta, fail, register

view_as_real = register("view_as_real", doc="A complex (*) tensor as a real (*, 2) one (real "
                                            "and imaginary parts in the last dim); a copy.")


@view_as_real.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x.dtype.is_complex:
        fail("view_as_real", f"expects a complex tensor, got {x.dtype}", x._shape)
    return [Meta(tuple(x._shape) + (2,), dt.float64 if x.dtype is dt.complex128
                 else dt.float32)]


def _as_real(a: np.ndarray) -> np.ndarray:
    real = np.float64 if a.dtype == np.complex128 else np.float32
    return a[..., None].view(real)  # a last dim of one element may change its item size


@view_as_real.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = _as_real(ins[0])


def _pairs_rule(n_kept: int):
    """Split on any of the complex tensor's dims (the pair dim stays whole); partial stays
    partial (both are linear over the reals). ``n_kept``: how many trailing dims the input
    has that may not be split."""
    def rule(inputs, attrs):
        for d in range(len(inputs[0]._shape) - n_kept):
            yield Sig((S(d),), (S(d),))
        yield Sig((P,), (P,))
    return rule


view_as_real.sbp(_pairs_rule(0))


@view_as_real.grad
def _(ctx, dout):
    return F.view_as_complex(dout)


view_as_complex = register("view_as_complex", doc="A real (*, 2) float32/float64 tensor as a "
                                                  "complex (*) one (a copy).")


@view_as_complex.infer
def _(inputs, attrs):
    x = inputs[0]
    s = tuple(x._shape)
    if x.dtype not in (dt.float32, dt.float64):
        fail("view_as_complex", f"expects a float32 or float64 tensor, got {x.dtype}", s)
    if not s or s[-1] != 2:
        fail("view_as_complex", f"expects a last dim of size 2, got shape {s}", s)
    return [Meta(s[:-1], dt.complex128 if x.dtype is dt.float64 else dt.complex64)]


@view_as_complex.kernel("cpu")
def _(ins, outs, attrs):
    a = ins[0]
    outs[0].real[...] = a[..., 0]
    outs[0].imag[...] = a[..., 1]


view_as_complex.sbp(_pairs_rule(1))


@view_as_complex.grad
def _(ctx, dout):
    return F.view_as_real(dout)
