"""Special functions: erfinv, lgamma, digamma, polygamma, and logaddexp / logaddexp2.

The kernels compute with SciPy's ``scipy.special`` when it is installed (faster) and otherwise
with NumPy (erfinv: a closed-form start and Newton steps on erf; digamma and polygamma:
recurrence and asymptotic series; lgamma: ``math.lgamma`` per element), both to double
precision; float16/bfloat16 and integer inputs compute in float32
and give their floating result dtype, as the other unary math ops do. Gradients are written with
functional ops, so they can be differentiated again (digamma's is polygamma(1, x), polygamma(n)'s
is polygamma(n + 1)).
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F
from actorflow.ops.activation import _composite, erf_array
from actorflow.ops.boxing import elementwise_rule, linear_rule
from actorflow.ops.elementwise import _needs, _quiet, binary, unary
from actorflow.ops.registry import Meta, fail, register

_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0


def _scipy(fn_name: str):
    """``scipy.special.<fn_name>``, or None when SciPy is not installed."""
    try:
        import scipy.special  # (optional: faster; the NumPy forms below are exact too)
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return getattr(scipy.special, fn_name)


def _math_lgamma(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # a pole (0, -1, -2, ...)
        return math.inf


def _lgamma_array(a: np.ndarray) -> np.ndarray:
    fn = _scipy("gammaln")
    if fn is None:
        fn = np.frompyfunc(_math_lgamma, 1, 1)
    r = np.asarray(fn(a), dtype=a.dtype)
    # |Gamma(x)| grows without bound as x -> -inf: lgamma(-inf) = +inf (C's lgamma, PyTorch);
    # SciPy's gammaln gives -inf there
    np.copyto(r, np.inf, where=np.isneginf(a))
    return r


def _erfinv_array(a: np.ndarray) -> np.ndarray:
    fn = _scipy("erfinv")
    if fn is not None:
        return np.asarray(fn(a), dtype=a.dtype)
    y = np.asarray(a, dtype=np.float64)
    # Winitzki's closed form (relative error ~2e-3), then Newton steps on erf(x) = y, each
    # squaring the error: three reach double precision
    with np.errstate(all="ignore"):
        w = np.log1p(-y * y)
        c = 2.0 / (math.pi * 0.147) + w / 2.0
        x = np.copysign(np.sqrt(np.sqrt(c * c - w / 0.147) - c), y)
        for _ in range(3):
            x = x - (erf_array(x) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
    x = np.where(np.abs(y) > 1.0, np.nan, x)
    return x.astype(a.dtype)


# Bernoulli numbers B_2k / (2k) for the asymptotic series of digamma, and B_2k for polygamma's
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)


def _digamma_numpy(x: np.ndarray) -> np.ndarray:
    """digamma in float64: reflection below 0.5, recurrence up to 10, asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        neg = x < 0.5
        z = np.where(neg, 1.0 - x, x)
        out = np.where(neg, -math.pi / np.tan(math.pi * x), 0.0)
        for _ in range(10):
            small = z < 10.0
            out = out - np.where(small, 1.0 / z, 0.0)
            z = np.where(small, z + 1.0, z)
        inv2 = 1.0 / (z * z)
        series = np.zeros_like(z)
        for k in range(len(_B2K) - 1, -1, -1):
            series = series * inv2 + _B2K[k] / (2 * (k + 1))
        out = out + np.log(z) - 0.5 / z - series * inv2
        out = np.where((x <= 0) & (x == np.floor(x)), np.nan, out)
    return out


def _polygamma_numpy(n: int, x: np.ndarray) -> np.ndarray:
    """polygamma(n >= 1) in float64: (-1)^(n+1) n! sum_k 1/(x+k)^(n+1), the first terms summed
    until x + k >= 20 (also for negative non-integer x), the rest by the asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    sign = -1.0 if n % 2 == 0 else 1.0
    with np.errstate(all="ignore"):
        acc = np.zeros_like(x)
        z = x.copy()
        steps = int(max(0.0, math.ceil(20.0 - float(np.nanmin(x, initial=20.0)))))
        for _ in range(steps):
            small = z < 20.0
            acc = acc + np.where(small, z ** -(n + 1), 0.0)
            z = np.where(small, z + 1.0, z)
        fact = math.factorial(n)
        tail = math.factorial(n - 1) / z ** n + fact / (2.0 * z ** (n + 1))
        for k, b in enumerate(_B2K, start=1):
            tail = tail + b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) \
                / z ** (2 * k + n)
        out = sign * (fact * acc + tail)
        pole = (x <= 0) & (x == np.floor(x))
        out = np.where(pole, sign * np.inf, out)  # zeta(n + 1, 0) = inf, as PyTorch
    return out


def _polygamma_array(n: int, a: np.ndarray) -> np.ndarray:
    """polygamma(n, a) (n = 0: digamma). As in PyTorch, digamma(+-0) is -inf (SciPy: nan)."""
    if n == 0:
        fn = _scipy("psi")
        out = np.asarray(fn(a) if fn is not None else _digamma_numpy(a), dtype=a.dtype)
        out[a == 0] = -np.inf
        return out
    fn = _scipy("polygamma")
    if fn is not None:
        return np.asarray(fn(n, a), dtype=a.dtype)
    return np.asarray(_polygamma_numpy(n, a), dtype=a.dtype)


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
polygamma.sbp(elementwise_rule)


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
    op.sbp(linear_rule)  # any split kept; linear over the reals, so partial stays partial
    return op


real = _part_op("real", "real", lambda ctx, g: F.cast(g, ctx.input_metas[0][1]))
imag = _part_op("imag", "imag", lambda ctx, g: F.mul(F.cast(g, ctx.input_metas[0][1]), 1j))


# ---- zeta (Hurwitz) -----------------------------------------------------------------------------

# B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta function
_B2J_OVER_FACT = tuple(b / math.factorial(2 * (k + 1)) for k, b in enumerate(_B2K))


def _zeta_numpy(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta ``sum_k (q + k)^-s`` in float64 (Cephes' domain: s > 1; s = 1 is inf,
    s < 1 nan; q a non-positive integer is inf, any other q <= 0 needs an integral s):
    the first 12 terms summed, the rest by Euler-Maclaurin."""
    s, q = np.broadcast_arrays(np.asarray(s, np.float64), np.asarray(q, np.float64))
    n = 12
    with np.errstate(all="ignore"):
        acc = np.zeros(s.shape)
        for k in range(n):
            acc = acc + (q + k) ** -s
        a = q + n
        tail = a ** (1.0 - s) / (s - 1.0) + 0.5 * a ** -s
        rising = s.copy()  # s (s+1) ... (s+2j-2)
        power = a ** (-s - 1.0)
        for j, c in enumerate(_B2J_OVER_FACT):
            tail = tail + c * rising * power
            rising = rising * (s + 2 * j + 1) * (s + 2 * j + 2)
            power = power / (a * a)
        out = acc + tail
    out = np.where(s == 1.0, np.inf, out)
    out = np.where(s < 1.0, np.nan, out)
    q_int = q == np.floor(q)
    out = np.where((q <= 0) & q_int & (s >= 1.0), np.inf, out)
    out = np.where((q <= 0) & ~q_int & (s != np.floor(s)), np.nan, out)
    return out


def _zeta_array(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    fn = _scipy("zeta")
    if fn is not None:
        return fn(s, q)
    return _zeta_numpy(s, q)


def _zeta_ufunc(a, b, out, dtype, casting):
    """``zeta(a, b)`` written into ``out``; half precision and integers compute in float32
    (float64 for float64 outputs)."""
    work = np.float64 if out.dtype == np.float64 else np.float32
    with np.errstate(all="ignore"):
        r = _zeta_array(np.asarray(a, work), np.asarray(b, work))
        np.copyto(out, np.asarray(r, work), casting="unsafe")


def _zeta_grad(ctx, g, x, q):
    """d zeta(x, q) / dq = -x zeta(x + 1, q); the derivative in x has no closed form here and
    is refused, as in PyTorch."""
    if ctx.needs_input_grad[0]:
        raise NotImplementedError("zeta: the derivative with respect to the first input (x) "
                                  "is not implemented (as in PyTorch); detach it")
    return None, (F.mul(g, F.neg(F.mul(x, F.zeta(F.add(x, 1.0), q))))
                  if ctx.needs_input_grad[1] else None)


def _scalar_zeta_grad(ctx, g, s, rev):
    x = ctx.inputs[0]
    if not rev:  # zeta(x, s): x is the exponent
        raise NotImplementedError("zeta: the derivative with respect to the first input (x) "
                                  "is not implemented (as in PyTorch); detach it")
    return F.mul(g, F.mul(F.zeta(s + 1.0, x), -s))


zeta, scalar_zeta = binary("zeta", _zeta_ufunc, kind="float", grad=_zeta_grad,
                           scalar_grad=_scalar_zeta_grad, amp="deny")
zeta.doc = ("zeta(x, q): the Hurwitz zeta function sum_k (q + k)^-x, elementwise, "
            "broadcasting x and q.")
