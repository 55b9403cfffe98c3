"""Special functions: erfinv, lgamma, digamma, polygamma, and logaddexp / logaddexp2.

The kernels compute with SciPy (``scipy.special``, an optional dependency: without it erfinv,
digamma and polygamma raise an error naming the op, and lgamma uses ``math.lgamma`` per
element); float16/bfloat16 and integer inputs compute in float32
and give their floating result dtype, as the other unary math ops do. Gradients are written with
functional ops, so they can be differentiated again (digamma's is polygamma(1, x), polygamma(n)'s
is polygamma(n + 1)).
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F
from actorflow.ops.activation import _composite
from actorflow.ops.elementwise import _needs, _quiet, binary, unary
from actorflow.ops.registry import Meta, fail, register

_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0


def _scipy(op_name: str, fn_name: str):
    """``scipy.special.<fn_name>``; an error naming the op when SciPy is not installed."""
    try:
        import scipy.special  # noqa: PLC0415  (an optional dependency, needed only here)
    except ImportError:  # pragma: no cover - SciPy is optional
        raise RuntimeError(f"{op_name}: needs SciPy (scipy.special.{fn_name})") from None
    return getattr(scipy.special, fn_name)


def _math_lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0, -1, -2, ...)
        return math.inf


def _lgamma_array(a: np.ndarray) -> np.ndarray:
    try:
        fn = _scipy("lgamma", "gammaln")
    except RuntimeError:  # pragma: no cover - SciPy is optional
        fn = np.frompyfunc(_math_lgamma, 1, 1)
    return np.asarray(fn(a), dtype=a.dtype)


def _erfinv_array(a: np.ndarray) -> np.ndarray:
    return np.asarray(_scipy("erfinv", "erfinv")(a), dtype=a.dtype)


def _polygamma_array(n: int, a: np.ndarray) -> np.ndarray:
    """polygamma(n, a) (n = 0: digamma). As in PyTorch, digamma(+-0) is -inf (SciPy: nan)."""
    if n == 0:
        out = np.asarray(_scipy("digamma", "psi")(a), dtype=a.dtype)
        out[a == 0] = -np.inf
        return out
    return np.asarray(_scipy("polygamma", "polygamma")(n, a), dtype=a.dtype)


# ---- erfinv -------------------------------------------------------------------------------------

erfinv = unary("erfinv", _composite(lambda a, attrs: _erfinv_array(a)), grad_uses_outputs=True,
               grad=lambda ctx, g: F.mul(g, F.mul(F.exp(F.square(ctx.outputs[0])),
                                                  _SQRT_PI_OVER_2)))

# ---- lgamma, digamma, polygamma -----------------------------------------------------------------

lgamma = unary("lgamma", _composite(lambda a, attrs: _lgamma_array(a)),
               grad=lambda ctx, g: F.mul(g, F.digamma(ctx.inputs[0])))

digamma = unary("digamma", _composite(lambda a, attrs: _polygamma_array(0, a)),
                grad=lambda ctx, g: F.mul(g, F.polygamma(1, ctx.inputs[0])))

polygamma = register("polygamma", elementwise=True, alias_safe=True,
                     doc="polygamma(n, x): the n-th derivative of digamma, elementwise (attr n, "
                         "an int >= 0).")


@polygamma.infer
def _(inputs, attrs):
    x = inputs[0]
    n = attrs["n"]
    if not isinstance(n, int) or n < 0:
        fail("polygamma", f"n must be a non-negative integer, got {n!r}", x._shape)
    d = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    return [Meta(x._shape, d)]


polygamma.kernel("cpu")(
    lambda ins, outs, attrs: _composite(lambda a, at: _polygamma_array(at["n"], a))(
        ins[0], outs[0], attrs))


@polygamma.grad
def _(ctx, g):
    return F.mul(g, F.polygamma(ctx.attrs["n"] + 1, ctx.inputs[0]))


# ---- logaddexp, logaddexp2 ----------------------------------------------------------------------

def _logaddexp_grads(base2: bool):
    """d/dx log(e^x + e^y) = e^(x - out) (and in base 2, 2^(x - out)); where both are -inf (out
    is -inf too) PyTorch gives 0.5 each, we give the same by taking x - out as 0 there."""
    def share(t, out):
        d = F.sub(t, out)
        d = F.where(F.isnan(d), 0.0, d)
        return F.exp2(d) if base2 else F.exp(d)

    def grad(ctx, g, x, y):
        out = F.logaddexp2(x, y) if base2 else F.logaddexp(x, y)
        return (F.mul(g, share(x, out)) if _needs(ctx, 0) else None,
                F.mul(g, share(y, out)) if _needs(ctx, 1) else None)

    def scalar_grad(ctx, g, s, rev):
        x = ctx.inputs[0]
        out = F.logaddexp2(x, s) if base2 else F.logaddexp(x, s)
        return F.mul(g, share(x, out))
    return grad, scalar_grad


logaddexp, scalar_logaddexp = binary("logaddexp", _quiet(np.logaddexp), kind="float",
                                     grad=_logaddexp_grads(False)[0],
                                     scalar_grad=_logaddexp_grads(False)[1], amp="deny")
logaddexp2, scalar_logaddexp2 = binary("logaddexp2", _quiet(np.logaddexp2), kind="float",
                                       grad=_logaddexp_grads(True)[0],
                                       scalar_grad=_logaddexp_grads(True)[1], amp="deny")


# ---- complex numbers ----------------------------------------------------------------------------
# Gradients follow PyTorch's convention for complex inputs (the conjugate Wirtinger derivative):
# conj's is conj(g), real's is g as a complex number, imag's is g * 1j.

conj = unary("conj", lambda x, out, attrs: np.conjugate(x, out=out), float_only=False,
             grad=lambda ctx, g: F.conj(g), complex_ok=True)


def _part_op(name: str, part: str, grad):
    op = register(name, elementwise=False, alias_safe=False,  # complex in, float out
                  doc=f"The {part} part of a complex tensor (a float tensor of its precision).")

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        if not x.dtype.is_complex:
            fail(name, f"expects a complex tensor, got {x.dtype}", x._shape)
        return [Meta(x._shape, dt.float64 if x.dtype is dt.complex128 else dt.float32)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        np.copyto(outs[0], getattr(ins[0], part))

    op.grad(grad)
    return op


real = _part_op("real", "real", lambda ctx, g: F.cast(g, ctx.input_metas[0][1]))
imag = _part_op("imag", "imag", lambda ctx, g: F.mul(F.cast(g, ctx.input_metas[0][1]), 1j))
