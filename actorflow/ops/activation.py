"""Unary math (abs, rounding, exp/log, trigonometry, erf, sigmoid, ...) and activation
functions (gelu, silu, leaky_relu, elu/selu/celu, softplus, hardtanh, mish, ...); clamp is in
``ops/clamp.py``.

The unary ops are built with ``elementwise.unary``; integer inputs to floating functions give
the default float dtype. Gradient rules are written with functional ops, so they also work when
differentiated again. Non-differentiable results (sign, floor, ...) get zero gradients, as in
PyTorch.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.framework.type_info import numpy_finfo
from actorflow.ops._common import F, HALF_DTYPES, autograd
from actorflow.ops.boxing import Sig, elementwise_rule
from actorflow.ops.clamp import clamp_into
from actorflow.ops.elementwise import (_integral_only, _ufunc, refuse_bool, unary)
from actorflow.ops.gelu_f32 import (AS_A, AS_P, GELU_C, gelu_c_row, gelu_f32, gelu_grad_c_row,
                                    gelu_grad_f32)
from actorflow.ops.gelu_with_grad import gelu_with_grad
from actorflow.ops.registry import Meta, fail, register

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _quiet_ufunc(u):
    """A kernel applying ufunc ``u`` without NumPy's warnings (nan/inf are valid results)."""
    def kernel(x, out, attrs):
        with np.errstate(all="ignore"):
            u(x, out=out, dtype=out.dtype, casting="unsafe")
    return kernel


def _src(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``x`` in the dtype composite kernels compute in: the output's when it is float32/64,
    else float32 (half precision and integer inputs); complex ones as they are."""
    wd = out.dtype if out.dtype in (np.float32, np.float64, np.complex64, np.complex128) \
        else np.dtype(np.float32)
    return x.astype(wd, copy=False)


def _composite(fn):
    """A kernel from ``fn(a, attrs) -> array`` computed in ``_src`` precision."""
    def kernel(x, out, attrs):
        with np.errstate(all="ignore"):
            np.copyto(out, fn(_src(x, out), attrs), casting="unsafe")
    return kernel


_special: dict = {}


def _special_fn(name: str):
    """``scipy.special.<name>`` when SciPy is installed, else ``math.<name>`` per element
    (both exact to double precision; SciPy is much faster)."""
    fn = _special.get(name)
    if fn is None:
        try:
            import scipy.special
            fn = getattr(scipy.special, name)
        except ImportError:  # pragma: no cover - SciPy is optional
            fn = math_array_fn(name)
        _special[name] = fn
    return fn


def math_array_fn(name: str):
    """Apply ``math.<name>`` to every element of an array (the SciPy-free path)."""
    ufunc = np.frompyfunc(getattr(math, name), 1, 1)
    return lambda a: ufunc(a).astype(a.dtype)


def _erf_float32(a: np.ndarray) -> np.ndarray:
    """erf in float32 with vectorised NumPy: A&S 7.1.26 (absolute error < 1.5e-7), and a Taylor
    series below |x| = 0.5 for relative accuracy where erf is small. (GELU has its own fused
    form of the same approximation in ``gelu_f32``.)"""
    shape = np.shape(a)
    a = np.asarray(a, dtype=np.float32).reshape(-1)  # 0-d: ufuncs would return scalars
    ax = np.abs(a)
    t = 1.0 / (1.0 + np.float32(AS_P) * ax)
    poly = np.float32(AS_A[0]) * t
    for c in AS_A[1:]:
        poly += np.float32(c)
        poly *= t
    np.multiply(ax, ax, out=ax)
    np.negative(ax, out=ax)
    np.exp(ax, out=ax)
    np.multiply(poly, ax, out=poly)
    big = np.subtract(1.0, poly, out=poly)
    np.copysign(big, a, out=big)
    x2 = a * a
    # 2/sqrt(pi) * sum_k (-1)^k x^(2k+1) / (k! (2k+1)), k = 0..5
    series = 1 - x2 * (1 / 3 - x2 * (1 / 10 - x2 * (1 / 42 - x2 * (1 / 216 - x2 / 1320))))
    series *= a * np.float32(2 / math.sqrt(math.pi))
    return np.where(np.abs(a) < 0.5, series, big).reshape(shape)


def erf_array(a: np.ndarray) -> np.ndarray:
    """The error function of a float32/float64 array (float32 and narrower: a fast vectorised
    approximation accurate to a few float32 ulps; float64: SciPy or ``math.erf``)."""
    if a.dtype.itemsize <= 4:
        return _erf_float32(a)
    return np.asarray(_special_fn("erf")(a), dtype=a.dtype)


def erfc_array(a: np.ndarray) -> np.ndarray:
    """The complementary error function ``1 - erf`` of a float32/float64 array (accurate for
    large arguments)."""
    return np.asarray(_special_fn("erfc")(a), dtype=a.dtype)


def _sigmoid_array(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return 1.0 / (1.0 + np.exp(-a))
    e = np.exp(-np.abs(a))  # never overflows
    return np.where(a >= 0, 1.0, e) / (1.0 + e)


def _zero_grad(ctx, g):
    return F.zeros_like(g)


def _x(ctx):
    return ctx.inputs[0]


def _y(ctx):
    return ctx.outputs[0]



abs_op = unary("abs", _ufunc(np.abs), float_only=False,
            grad=lambda ctx, g: F.mul(g, F.sign(ctx.inputs[0])))
def _sign_kernel(x, out, attrs):
    if x.dtype == np.bool_:  # NumPy has no bool loop; the sign of a bool is itself (PyTorch)
        np.copyto(out, x, casting="unsafe")
    elif x.dtype.kind == "f" or x.dtype in HALF_DTYPES:
        # PyTorch's (x > 0) - (x < 0): 0 for NaN (NumPy keeps NaN) and +0 for -0
        neg = np.less(x, 0)  # read before out is written: out may be x (alias-safe)
        np.copyto(out, np.greater(x, 0), casting="unsafe")
        out -= neg
    else:
        np.sign(x, out=out, dtype=out.dtype, casting="unsafe")


sign = unary("sign", _sign_kernel, float_only=False, grad=_zero_grad)
square = unary("square", _ufunc(np.square), float_only=False, complex_ok=True,
               grad=lambda ctx, g: F.mul(g, F.mul(F.conj(ctx.inputs[0]), 2)))
floor = unary("floor", _ufunc(np.floor), float_only=False, grad=_zero_grad)
ceil = unary("ceil", _ufunc(np.ceil), float_only=False, grad=_zero_grad)
trunc = unary("trunc", _ufunc(np.trunc), float_only=False, grad=_zero_grad)
round_op = unary("round", lambda x, out, attrs: np.round(x, attrs.get("decimals", 0), out=out),
              float_only=False, grad=_zero_grad)
refuse_bool(round_op, floor, ceil, trunc, abs_op)  # PyTorch has no bool rounding or abs


def _square_infer(inputs, attrs, base=square.infer_fn):
    m = base(inputs, attrs)[0]  # a bool squares to int64, as PyTorch's pow(x, 2)
    return [Meta(m.shape, dt.int64)] if m.dtype is dt.bool_ else [m]


square.infer(_square_infer)
isnan = unary("isnan", _ufunc(np.isnan), float_only=False, out_dtype=dt.bool_,
              complex_ok=True)
isinf = unary("isinf", _ufunc(np.isinf), float_only=False, out_dtype=dt.bool_,
              complex_ok=True)
isfinite = unary("isfinite", _ufunc(np.isfinite), float_only=False, out_dtype=dt.bool_,
                 complex_ok=True)
logical_not = unary("logical_not", _ufunc(np.logical_not), float_only=False, out_dtype=dt.bool_)
bitwise_not = unary("bitwise_not", _ufunc(np.invert), float_only=False, elementwise=False)
_integral_only(bitwise_not)


def _nan_to_num(x, out, attrs):
    np.copyto(out, x)
    if out.dtype.kind in "biu":
        return
    info = numpy_finfo(out.dtype)
    pos, neg = attrs.get("posinf"), attrs.get("neginf")
    np.copyto(out, np.asarray(attrs.get("nan", 0.0)), casting="unsafe", where=np.isnan(x))
    np.copyto(out, np.asarray(info.max if pos is None else pos), casting="unsafe",
              where=np.isposinf(x))
    np.copyto(out, np.asarray(info.min if neg is None else neg), casting="unsafe",
              where=np.isneginf(x))


nan_to_num = unary("nan_to_num", _nan_to_num, float_only=False,
                   grad=lambda ctx, g: F.where(F.isfinite(ctx.inputs[0]), g, 0.0))



# ---- exponentials, logarithms, powers -----------------------------------------------------------

exp2 = unary("exp2", _quiet_ufunc(np.exp2), grad_uses_outputs=True,
             grad=lambda ctx, g: F.mul(g, F.mul(_y(ctx), _LN2)), amp="deny")
expm1 = unary("expm1", _quiet_ufunc(np.expm1), grad_uses_outputs=True,
              grad=lambda ctx, g: F.mul(g, F.add(_y(ctx), 1)), amp="deny")
log = unary("log", _quiet_ufunc(np.log), grad=lambda ctx, g: F.div(g, F.conj(_x(ctx))),
            amp="deny", complex_ok=True)
log2 = unary("log2", _quiet_ufunc(np.log2),
             grad=lambda ctx, g: F.div(g, F.mul(_x(ctx), _LN2)), amp="deny")
log10 = unary("log10", _quiet_ufunc(np.log10),
              grad=lambda ctx, g: F.div(g, F.mul(_x(ctx), _LN10)), amp="deny")
log1p = unary("log1p", _quiet_ufunc(np.log1p), amp="deny",
              grad=lambda ctx, g: F.div(g, F.add(_x(ctx), 1)))
sqrt = unary("sqrt", _quiet_ufunc(np.sqrt), grad_uses_outputs=True, complex_ok=True,
             grad=lambda ctx, g: F.div(F.mul(g, 0.5), F.conj(_y(ctx))))
rsqrt = unary("rsqrt", _composite(lambda a, attrs: 1.0 / np.sqrt(a)), grad_uses_outputs=True,
              grad=lambda ctx, g: F.mul(g, F.mul(F.pow(_y(ctx), 3), -0.5)), amp="deny")
reciprocal = unary("reciprocal", _quiet_ufunc(np.reciprocal), grad_uses_outputs=True,
                   grad=lambda ctx, g: F.neg(F.mul(g, F.square(_y(ctx)))), amp="deny")

# ---- trigonometric and hyperbolic ---------------------------------------------------------------

# (complex inputs: the gradient is g times the conjugate derivative, PyTorch's convention)
sin = unary("sin", _quiet_ufunc(np.sin), complex_ok=True,
            grad=lambda ctx, g: F.mul(g, F.conj(F.cos(_x(ctx)))))
cos = unary("cos", _quiet_ufunc(np.cos), complex_ok=True,
            grad=lambda ctx, g: F.neg(F.mul(g, F.conj(F.sin(_x(ctx))))))
tan = unary("tan", _quiet_ufunc(np.tan), grad_uses_outputs=True, complex_ok=True,
            grad=lambda ctx, g: F.mul(g, F.conj(F.add(F.square(_y(ctx)), 1))), amp="deny")
asin = unary("asin", _quiet_ufunc(np.arcsin),
             grad=lambda ctx, g: F.mul(g, F.rsqrt(F.rsub(F.square(_x(ctx)), 1))), amp="deny")
acos = unary("acos", _quiet_ufunc(np.arccos),
             grad=lambda ctx, g: F.neg(F.mul(g, F.rsqrt(F.rsub(F.square(_x(ctx)), 1)))), amp="deny")
atan = unary("atan", _quiet_ufunc(np.arctan),
             grad=lambda ctx, g: F.div(g, F.add(F.square(_x(ctx)), 1)))
sinh = unary("sinh", _quiet_ufunc(np.sinh), amp="deny", complex_ok=True,
             grad=lambda ctx, g: F.mul(g, F.conj(F.cosh(_x(ctx)))))
cosh = unary("cosh", _quiet_ufunc(np.cosh), amp="deny", complex_ok=True,
             grad=lambda ctx, g: F.mul(g, F.conj(F.sinh(_x(ctx)))))
tanh = unary("tanh", _quiet_ufunc(np.tanh), grad_uses_outputs=True, complex_ok=True,
             grad=lambda ctx, g: F.mul(g, F.conj(F.rsub(F.square(_y(ctx)), 1))),
             activation=True)
asinh = unary("asinh", _quiet_ufunc(np.arcsinh),
              grad=lambda ctx, g: F.mul(g, F.rsqrt(F.add(F.square(_x(ctx)), 1))))
acosh = unary("acosh", _quiet_ufunc(np.arccosh),
              grad=lambda ctx, g: F.mul(g, F.rsqrt(F.sub(F.square(_x(ctx)), 1))))
atanh = unary("atanh", _quiet_ufunc(np.arctanh),
              grad=lambda ctx, g: F.div(g, F.rsub(F.square(_x(ctx)), 1)))

# ---- erf, sigmoid -------------------------------------------------------------------------------


def _gauss(x):
    """exp(-x^2), the shape of erf's derivative."""
    return F.exp(F.neg(F.square(x)))


erf = unary("erf", _composite(lambda a, attrs: erf_array(a)),
            grad=lambda ctx, g: F.mul(g, F.mul(_gauss(_x(ctx)), _TWO_OVER_SQRT_PI)))
erfc = unary("erfc", _composite(lambda a, attrs: erfc_array(a)),
             grad=lambda ctx, g: F.mul(g, F.mul(_gauss(_x(ctx)), -_TWO_OVER_SQRT_PI)))
sigmoid = unary("sigmoid", _composite(lambda a, attrs: _sigmoid_array(a)), grad_uses_outputs=True,
                grad=lambda ctx, g: F.mul(g, F.conj(F.mul(_y(ctx), F.rsub(_y(ctx), 1)))),
                activation=True, complex_ok=True)


# how each op above computes one element in generated C (ops/registry.py: c_expr)
abs_op.c_expr = "fabs({0})"
square.c_expr = "({0} * {0})"
floor.c_expr = "floor({0})"
ceil.c_expr = "ceil({0})"
trunc.c_expr = "trunc({0})"
isnan.c_expr = "isnan({r0})"
isinf.c_expr = "isinf({r0})"
isfinite.c_expr = "isfinite({r0})"
logical_not.c_expr = "(!{r0})"
exp2.c_expr = "exp2({0})"
expm1.c_expr = "expm1({0})"
log.c_expr = "log({0})"
log2.c_expr = "log2({0})"
log10.c_expr = "log10({0})"
log1p.c_expr = "log1p({0})"
sqrt.c_expr = "sqrt({0})"
rsqrt.c_expr = "(({T})1 / sqrt({0}))"
reciprocal.c_expr = "(({T})1 / {0})"
sin.c_expr = "sin({0})"
cos.c_expr = "cos({0})"
tan.c_expr = "tan({0})"
asin.c_expr = "asin({0})"
acos.c_expr = "acos({0})"
atan.c_expr = "atan({0})"
sinh.c_expr = "sinh({0})"
cosh.c_expr = "cosh({0})"
tanh.c_expr = "tanh({0})"
asinh.c_expr = "asinh({0})"
acosh.c_expr = "acosh({0})"
atanh.c_expr = "atanh({0})"
sigmoid.c_expr = "(({0} >= 0 ? ({T})1 : exp(-fabs({0}))) / (({T})1 + exp(-fabs({0}))))"

# ---- activations --------------------------------------------------------------------------------

def _gelu_kernel(ins, outs, attrs):
    x, out = ins[0], outs[0]
    cdf = outs[1] if len(outs) > 1 else None
    if out.dtype != np.float64:  # float32 and narrower: the blocked float32 kernels
        gelu_f32(x, out, attrs["approximate"], cdf)
        return
    a = x.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):
        c = _gelu_factor64(a, attrs["approximate"])
        np.multiply(a, c, out=out, casting="unsafe")
        if cdf is not None:
            np.copyto(cdf, c, casting="unsafe")


def _gelu_factor64(x: np.ndarray, approximate: str) -> np.ndarray:
    """c(x) of gelu(x) = x c(x) in float64: Phi(x), or (1 + tanh u) / 2 for the tanh form."""
    if approximate == "tanh":
        return 0.5 * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + GELU_C * x * x * x)))
    return 0.5 * (1.0 + erf_array(x * math.sqrt(0.5)))


def _gelu_derivative64(x: np.ndarray, approximate: str, cdf: np.ndarray | None) -> np.ndarray:
    """d gelu / dx in float64 (exact form: from the saved ``cdf`` = Phi(x) when given)."""
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(_SQRT_2_OVER_PI * x * (1.0 + GELU_C * x2))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * GELU_C * x2)
    if cdf is None:
        cdf = _gelu_factor64(x, approximate)
    return cdf + x * np.exp(-0.5 * x * x) * _INV_SQRT_2PI


gelu_grad = register("gelu_grad", elementwise=True, alias_safe=True,
                     doc="dout * gelu'(x): the gradient of gelu in one kernel "
                         "(inputs dout, x, [Phi(x), if gelu saved it]).")


gelu_grad.sbp(elementwise_rule)


@gelu_grad.infer
def _(inputs, attrs):
    return [Meta(inputs[1]._shape, inputs[1].dtype)]


@gelu_grad.kernel("cpu")
def _(ins, outs, attrs):
    g, x = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    out = outs[0]
    if out.dtype != np.float64:
        gelu_grad_f32(g, x, out, attrs["approximate"], c)
        return
    with np.errstate(all="ignore"):
        d = _gelu_derivative64(x.astype(np.float64, copy=False), attrs["approximate"],
                               None if c is None else c.astype(np.float64, copy=False))
        np.multiply(d, g, out=out, casting="unsafe")


@gelu_grad.grad
def _(ctx, dout):
    g, x = ctx.inputs[0], ctx.inputs[1]
    need = ctx.needs_input_grad
    dg = F.gelu_grad(dout, *ctx.inputs[1:], approximate=ctx.attrs["approximate"]) \
        if need[0] else None
    dx = None
    # Phi(x) is a function of x: its part of the derivative is in dx, and Phi gets none
    if any(need[1:]):
        dx = F.mul(F.mul(dout, g), _gelu_second_derivative(x, ctx.attrs["approximate"]))
    return (dg, dx) if len(need) == 2 else (dg, dx, None)


def _gelu_grad(ctx, g, _dphi=None):
    if g is None:  # only the saved Phi got a gradient: nothing reaches x through it
        return None
    phi = ctx.outputs[1] if ctx.attrs.get("save_cdf") else None
    return F.gelu_grad(g, _x(ctx), phi, approximate=ctx.attrs["approximate"])


def _gelu_second_derivative(x, approximate):
    """gelu''(x) with functional ops (used only for double backward)."""
    if approximate == "tanh":
        # differentiate the composite first derivative with autograd itself
        with autograd.enable_grad():
            xd = F.detach(x)
            xd.requires_grad_(True)
            (dd,) = autograd.grad(F.sum(_gelu_first_derivative_composite(xd, approximate)), [xd])
        return dd
    # exact: gelu'' = phi(x) (2 - x^2)
    pdf = F.mul(F.exp(F.mul(F.square(x), -0.5)), _INV_SQRT_2PI)
    return F.mul(pdf, F.rsub(F.square(x), 2.0))


def _gelu_first_derivative_composite(x, approximate):
    if approximate == "tanh":
        # d/dx 0.5 x (1 + t), t = tanh(k (x + c x^3)):  0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2)
        x2 = F.square(x)
        t = F.tanh(F.mul(F.add(x, F.mul(F.mul(x2, x), GELU_C)), _SQRT_2_OVER_PI))
        inner = F.mul(F.add(F.mul(x2, 3 * GELU_C), 1), 0.5 * _SQRT_2_OVER_PI)
        return F.add(F.mul(F.add(t, 1), 0.5), F.mul(F.mul(x, F.rsub(F.square(t), 1)), inner))
    # Phi(x) + x phi(x)
    cdf = F.mul(F.add(F.erf(F.mul(x, math.sqrt(0.5))), 1), 0.5)
    pdf = F.mul(F.exp(F.mul(F.square(x), -0.5)), _INV_SQRT_2PI)
    return F.add(cdf, F.mul(x, pdf))


gelu = register("gelu", grad_uses_outputs=(1,), optional_outputs={"save_cdf": 1},
                elementwise=True, alias_safe=True, activation=True,
                doc="gelu(x) = x Phi(x), or its tanh form; with attr save_cdf (exact form) it "
                    "also outputs Phi(x), which its gradient reads instead of recomputing it "
                    "(only that output is saved, so y may still change in place).")


@gelu.infer
def _(inputs, attrs):
    x = inputs[0]
    d = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    y = Meta(x._shape, d)
    if not attrs.get("save_cdf"):
        return [y]
    if attrs["approximate"] != "none":
        fail("gelu", "save_cdf is only for the exact form (approximate='none')", x._shape)
    return [y, Meta(x._shape, d)]


@gelu.sbp
def _(inputs, attrs):
    """Elementwise; the saved Phi(x) (save_cdf) is laid out as y."""
    n_out = 2 if attrs.get("save_cdf") else 1
    for sig in elementwise_rule(inputs, attrs):
        yield Sig(sig.ins, sig.outs * n_out)


gelu.kernel("cpu")(_gelu_kernel)
gelu.grad(_gelu_grad)
gelu.c_row = gelu_c_row  # one row in generated C (ops/registry.py: c_row)
gelu_grad.c_row = gelu_grad_c_row
# a recomputed gelu and its gradient in one generated loop (compiler/codegen/recompute.py)
gelu.recompute_grad = (gelu_grad, gelu_with_grad)


def _silu_grad(ctx, g):  # s (1 + x (1 - s)), s = sigmoid(x)
    x = _x(ctx)
    s = F.sigmoid(x)
    return F.mul(g, F.mul(s, F.add(F.mul(x, F.rsub(s, 1)), 1)))


silu = unary("silu", _composite(lambda a, attrs: a * _sigmoid_array(a)), grad=_silu_grad,
             activation=True)


def _mish_grad(ctx, g):  # tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x)
    x = _x(ctx)
    t = F.tanh(F.softplus(x))
    return F.mul(g, F.add(t, F.mul(F.mul(x, F.sigmoid(x)), F.rsub(F.square(t), 1))))


mish = unary("mish", _composite(lambda a, attrs: a * np.tanh(np.logaddexp(0.0, a))),
             grad=_mish_grad, activation=True)

leaky_relu = unary(
    "leaky_relu",
    _composite(lambda a, attrs: np.where(a > 0, a, a * attrs["negative_slope"])),
    grad=lambda ctx, g: F.leaky_relu_grad(g, _x(ctx), ctx.attrs["negative_slope"]),
    activation=True)


def _elu_kernel(a, attrs):
    alpha, scale, input_scale = attrs["alpha"], attrs["scale"], attrs["input_scale"]
    return scale * np.where(a > 0, a, alpha * np.expm1(a * input_scale))


def _elu_grad(ctx, g):
    x, alpha = _x(ctx), ctx.attrs["alpha"]
    scale, input_scale = ctx.attrs["scale"], ctx.attrs["input_scale"]
    neg = F.mul(F.exp(F.mul(x, input_scale)), scale * alpha * input_scale)
    return F.mul(g, F.where(F.gt(x, 0), scale, neg))


# elu(alpha); selu = elu(SELU_ALPHA, scale=SELU_SCALE);
# celu(alpha) = elu(alpha, input_scale=1/alpha)
elu = unary("elu", _composite(_elu_kernel), grad=_elu_grad, activation=True)


def _softplus_kernel(a, attrs):
    beta = attrs["beta"]
    return np.where(a * beta > attrs["threshold"], a, np.logaddexp(0.0, a * beta) / beta)


def _softplus_grad(ctx, g):  # sigmoid(beta x), or 1 on the linear part
    x, beta = _x(ctx), ctx.attrs["beta"]
    bx = F.mul(x, beta)
    return F.where(F.gt(bx, ctx.attrs["threshold"]), g, F.mul(g, F.sigmoid(bx)))


softplus = unary("softplus", _composite(_softplus_kernel), grad=_softplus_grad,
                 activation=True, amp="deny")


def _hardtanh_kernel(x, out, attrs):
    clamp_into(out, x, attrs["min_val"], attrs["max_val"])


def _hardtanh_grad(ctx, g):  # passes strictly inside (min_val, max_val)
    return F.hardtanh_grad(g, _x(ctx), ctx.attrs["min_val"], ctx.attrs["max_val"])


hardtanh = unary("hardtanh", _hardtanh_kernel, float_only=False, grad=_hardtanh_grad,
                 activation=True)

threshold = unary(
    "threshold",
    lambda x, out, attrs: np.copyto(out, np.where(x > attrs["threshold"], x, attrs["value"]),
                                    casting="unsafe"),
    float_only=False,
    grad=lambda ctx, g: F.threshold_grad(g, _x(ctx), ctx.attrs["threshold"]))

hardsigmoid = unary(
    "hardsigmoid", _composite(lambda a, attrs: np.clip(a / 6.0 + 0.5, 0.0, 1.0)),
    grad=lambda ctx, g: F.hardsigmoid_grad(g, _x(ctx)), activation=True)


def _hardswish_grad(ctx, g):  # 0 up to -3, x/3 + 1/2 on (-3, 3), 1 from 3 on (as PyTorch)
    x = _x(ctx)
    mid = F.mul(g, F.add(F.div(x, 3), 0.5))
    return F.where(F.le(x, -3), 0.0, F.where(F.lt(x, 3), mid, g))


hardswish = unary("hardswish",
                  _composite(lambda a, attrs: a * np.clip(a / 6.0 + 0.5, 0.0, 1.0)),
                  grad=_hardswish_grad, activation=True)

softsign = unary("softsign", _composite(lambda a, attrs: a / (1.0 + np.abs(a))),
                 grad=lambda ctx, g: F.div(g, F.square(F.add(F.abs(_x(ctx)), 1))), activation=True)

logsigmoid = unary(
    "logsigmoid",
    _composite(lambda a, attrs: np.minimum(a, 0.0) - np.log1p(np.exp(-np.abs(a)))),
    grad=lambda ctx, g: F.mul(g, F.sigmoid(F.neg(_x(ctx)))))


def _shrink_grad(ctx, g):  # both shrinks pass the gradient where |x| > lambd
    return F.shrink_grad(g, _x(ctx), ctx.attrs["lambd"])


hardshrink = unary(
    "hardshrink",
    _composite(lambda a, attrs: np.where(np.abs(a) > attrs["lambd"], a, 0.0)),
    grad=_shrink_grad)
softshrink = unary(
    "softshrink",
    _composite(lambda a, attrs: np.where(np.abs(a) > attrs["lambd"],
                                         a - np.sign(a) * attrs["lambd"], 0.0)),
    grad=_shrink_grad)
