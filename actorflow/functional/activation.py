"""Unary math (``flow.abs``, ``flow.log``, ``flow.sigmoid``, ...) and activation functions
(``flow.gelu``, ``flow.silu``, ``flow.leaky_relu``, ...), with their Tensor methods."""
from __future__ import annotations

from actorflow.autograd.grad_mode import is_grad_enabled
from actorflow.dispatch import apply
from actorflow.framework.dtype import float32, float64
from actorflow.functional.elementwise import unary_fn
from actorflow.ops import registry
from actorflow.ops.activation import SELU_ALPHA, SELU_SCALE
from actorflow.tensor import Tensor, register_tensor_methods

_abs_real, abs_ = unary_fn("abs")
_COMPLEX_ABS = registry.get("complex_abs")


def abs(x: Tensor) -> Tensor:  # noqa: A001  (flow.abs, as in PyTorch)
    """Elementwise ``|x|``; of a complex tensor, its modulus (a float tensor)."""
    if x.dtype.is_complex:
        return apply(_COMPLEX_ABS, [x], {})[0]
    return _abs_real(x)


sign, sign_ = unary_fn("sign")
square, square_ = unary_fn("square")
floor, floor_ = unary_fn("floor")
ceil, ceil_ = unary_fn("ceil")
trunc, trunc_ = unary_fn("trunc")
isnan, _ = unary_fn("isnan")
isinf, _ = unary_fn("isinf")
isfinite, _ = unary_fn("isfinite")
logical_not, logical_not_ = unary_fn("logical_not")
bitwise_not, bitwise_not_ = unary_fn("bitwise_not")
exp2, exp2_ = unary_fn("exp2")
expm1, expm1_ = unary_fn("expm1")
log, log_ = unary_fn("log")
log2, log2_ = unary_fn("log2")
log10, log10_ = unary_fn("log10")
log1p, log1p_ = unary_fn("log1p")
sqrt, sqrt_ = unary_fn("sqrt")
rsqrt, rsqrt_ = unary_fn("rsqrt")
reciprocal, reciprocal_ = unary_fn("reciprocal")
sin, sin_ = unary_fn("sin")
cos, cos_ = unary_fn("cos")
tan, tan_ = unary_fn("tan")
asin, asin_ = unary_fn("asin")
acos, acos_ = unary_fn("acos")
atan, atan_ = unary_fn("atan")
sinh, sinh_ = unary_fn("sinh")
cosh, cosh_ = unary_fn("cosh")
tanh, tanh_ = unary_fn("tanh")
asinh, asinh_ = unary_fn("asinh")
acosh, acosh_ = unary_fn("acosh")
atanh, atanh_ = unary_fn("atanh")
erf, erf_ = unary_fn("erf")
erfc, erfc_ = unary_fn("erfc")
sigmoid, sigmoid_ = unary_fn("sigmoid")
silu, _silu_ = unary_fn("silu")
mish, _mish_ = unary_fn("mish")
hardsigmoid, _hardsigmoid_ = unary_fn("hardsigmoid")
hardswish, _hardswish_ = unary_fn("hardswish")
softsign, _ = unary_fn("softsign")
logsigmoid, _ = unary_fn("logsigmoid")
absolute, fix, arcsin, arccos, arctan = abs, trunc, asin, acos, atan
arcsinh, arccosh, arctanh = asinh, acosh, atanh

_round = registry.get("round")
_nan_to_num = registry.get("nan_to_num")
_gelu = registry.get("gelu")
_leaky_relu = registry.get("leaky_relu")
_elu = registry.get("elu")
_softplus = registry.get("softplus")
_hardtanh = registry.get("hardtanh")
_threshold = registry.get("threshold")
_hardshrink = registry.get("hardshrink")
_softshrink = registry.get("softshrink")


def _call(op, x: Tensor, attrs: dict, inplace: bool) -> Tensor:
    return apply(op, [x], attrs, out=[x] if inplace else None)[0]


def round(x: Tensor, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round to ``decimals`` decimal places (halves to even, as in PyTorch)."""
    return _call(_round, x, {"decimals": int(decimals)}, False)


def round_(x: Tensor, decimals: int = 0) -> Tensor:
    """In-place ``round``."""
    return _call(_round, x, {"decimals": int(decimals)}, True)


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """Replace NaN by ``nan`` and infinities by ``posinf``/``neginf`` (default: the dtype's
    largest and smallest finite values)."""
    return _call(_nan_to_num, x, {"nan": nan, "posinf": posinf, "neginf": neginf}, False)


def nan_to_num_(x: Tensor, nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> Tensor:
    """In-place ``nan_to_num``."""
    return _call(_nan_to_num, x, {"nan": nan, "posinf": posinf, "neginf": neginf}, True)


# ---- activations ----------------------------------------------------------------------------

def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit: ``x * Phi(x)``; ``approximate="tanh"`` uses the tanh form."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    # while autograd records, exact float32/64 gelu also outputs Phi(x) for its gradient
    save = (approximate == "none" and x.requires_grad and x.dtype in (float32, float64)
            and is_grad_enabled())
    return _call(_gelu, x, {"approximate": approximate, "save_cdf": save}, False)


def gelu_grad(dout: Tensor, x: Tensor, cdf: Tensor | None = None,
              approximate: str = "none") -> Tensor:
    """``dout * gelu'(x)`` (the gradient of gelu, as one op), from gelu's saved ``cdf`` =
    Phi(x) (exact form) when given."""
    ins = [dout, x] if cdf is None else [dout, x, cdf]
    return apply(registry.get("gelu_grad"), ins, {"approximate": approximate})[0]


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``."""
    return _call(_leaky_relu, x, {"negative_slope": float(negative_slope)}, inplace)


def rrelu(x: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False, generator=None) -> Tensor:
    """Randomized leaky ReLU: in training each negative element is scaled by its own slope
    drawn uniformly from [lower, upper] (the gradient there is that slope); otherwise
    ``leaky_relu`` with slope ``(lower + upper) / 2``."""
    lower, upper = float(lower), float(upper)
    if lower > upper:
        raise ValueError(f"rrelu: lower ({lower}) must not exceed upper ({upper})")
    if not training or lower == upper:
        return leaky_relu(x, (lower + upper) / 2, inplace)
    from actorflow.autograd.grad_mode import no_grad
    from actorflow.functional.creation import rand
    from actorflow.functional.elementwise import where
    with no_grad():
        noise = rand(tuple(x.shape), dtype=x.dtype, generator=generator)
        slope = where(x >= 0, 1.0, noise * (upper - lower) + lower)
    return x.mul_(slope) if inplace else x * slope


def rrelu_(x: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator=None) -> Tensor:
    """In-place ``rrelu``."""
    return rrelu(x, lower, upper, training, True, generator)


def _elu_call(x: Tensor, alpha: float, scale: float, input_scale: float, inplace: bool):
    attrs = {"alpha": float(alpha), "scale": float(scale), "input_scale": float(input_scale)}
    return _call(_elu, x, attrs, inplace)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    return _elu_call(x, alpha, 1.0, 1.0, inplace)


def selu(x: Tensor, inplace: bool = False) -> Tensor:
    """Scaled ELU with the self-normalising constants."""
    return _elu_call(x, SELU_ALPHA, SELU_SCALE, 1.0, inplace)


def celu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise ValueError("celu: alpha must not be zero")
    return _elu_call(x, alpha, 1.0, 1.0 / alpha, inplace)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    return _call(_softplus, x, {"beta": float(beta), "threshold": float(threshold)}, False)


def hardtanh(x: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """Clamp to ``[min_val, max_val]`` (gradient zero at and beyond the limits)."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
    return _call(_hardtanh, x, {"min_val": min_val, "max_val": max_val}, inplace)


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def _number(v):
    """A Python number from a number or a one-element tensor (an op's scalar parameter)."""
    return v.item() if isinstance(v, Tensor) else v


def threshold(x: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (either may be a one-element tensor)."""
    attrs = {"threshold": _number(threshold), "value": _number(value)}
    return _call(_threshold, x, attrs, inplace)


def hardshrink(x: Tensor, lambd: float = 0.5, inplace: bool = False) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return _call(_hardshrink, x, {"lambd": float(_number(lambd))}, inplace)


def softshrink(x: Tensor, lambd: float = 0.5, inplace: bool = False) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    lambd = float(_number(lambd))
    if lambd < 0:
        raise ValueError(f"softshrink: lambd must be non-negative, got {lambd}")
    return _call(_softshrink, x, {"lambd": lambd}, inplace)


def _with_inplace(fn, fn_):
    """``fn(x, inplace=False)`` for the activations whose nn modules take ``inplace``."""
    def f(x: Tensor, inplace: bool = False) -> Tensor:
        return fn_(x) if inplace else fn(x)
    f.__name__, f.__doc__ = fn.__name__, fn.__doc__
    return f


silu = _with_inplace(silu, _silu_)
mish = _with_inplace(mish, _mish_)
hardsigmoid = _with_inplace(hardsigmoid, _hardsigmoid_)
hardswish = _with_inplace(hardswish, _hardswish_)

_UNARY = {
    "abs": abs, "sign": sign, "square": square, "floor": floor, "ceil": ceil, "trunc": trunc,
    "exp2": exp2, "expm1": expm1, "log": log, "log2": log2, "log10": log10, "log1p": log1p,
    "sqrt": sqrt, "rsqrt": rsqrt, "reciprocal": reciprocal, "sin": sin, "cos": cos, "tan": tan,
    "asin": asin, "acos": acos, "atan": atan, "sinh": sinh, "cosh": cosh, "tanh": tanh,
    "asinh": asinh, "acosh": acosh, "atanh": atanh, "erf": erf, "erfc": erfc, "sigmoid": sigmoid,
    "logical_not": logical_not, "bitwise_not": bitwise_not,
}
_INPLACE = {
    "abs_": abs_, "sign_": sign_, "square_": square_, "floor_": floor_, "ceil_": ceil_,
    "trunc_": trunc_, "exp2_": exp2_, "expm1_": expm1_, "log_": log_, "log2_": log2_,
    "log10_": log10_, "log1p_": log1p_, "sqrt_": sqrt_, "rsqrt_": rsqrt_,
    "reciprocal_": reciprocal_, "sin_": sin_, "cos_": cos_, "tan_": tan_, "asin_": asin_,
    "acos_": acos_, "atan_": atan_, "sinh_": sinh_, "cosh_": cosh_, "tanh_": tanh_,
    "asinh_": asinh_, "acosh_": acosh_, "atanh_": atanh_, "erf_": erf_, "erfc_": erfc_,
    "sigmoid_": sigmoid_, "logical_not_": logical_not_, "bitwise_not_": bitwise_not_,
    "round_": round_, "nan_to_num_": nan_to_num_,
}

register_tensor_methods({
    **_UNARY, **_INPLACE,
    "absolute": abs, "fix": trunc, "arcsin": asin, "arccos": acos, "arctan": atan,
    "arcsinh": asinh, "arccosh": acosh, "arctanh": atanh, "round": round,
    "nan_to_num": nan_to_num, "isnan": isnan, "isinf": isinf, "isfinite": isfinite,
    "gelu": gelu, "silu": silu, "mish": mish, "selu": selu, "celu": celu, "elu": elu,
    "softplus": softplus, "relu6": relu6, "hardtanh": hardtanh, "hardsigmoid": hardsigmoid,
    "hardswish": hardswish, "leaky_relu": leaky_relu, "softsign": softsign,
    "logsigmoid": logsigmoid,
})

def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """Softmax of ``(logits + Gumbel noise) / tau`` along ``dim``; ``hard`` returns the one-hot
    of its argmax with the soft sample's gradient (straight-through)."""
    from actorflow.autograd import no_grad
    # (late: these functional modules import this one)
    from actorflow.functional.creation import rand_like, zeros_like
    from actorflow.functional.index import scatter
    from actorflow.functional.nn_ops import softmax
    from actorflow.functional.reduce_extrema import argmax

    with no_grad():
        u = rand_like(logits)
        gumbels = -log((-log(u.clamp(min=1e-20))).clamp(min=1e-20))
    y = softmax((logits + gumbels) / float(tau), dim=dim)
    if not hard:
        return y
    index = argmax(y, dim=dim, keepdim=True)
    y_hard = scatter(zeros_like(logits), dim, index, value=1.0)
    return y_hard - y.detach() + y


__all__ = ["gelu_grad", "rrelu", "rrelu_", "gumbel_softmax",
    *_UNARY, "isnan", "isinf", "isfinite", "round", "nan_to_num", "absolute", "fix", "arcsin",
    "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "gelu", "silu", "mish", "leaky_relu",
    "elu", "selu", "celu", "softplus", "hardtanh", "relu6", "threshold", "hardsigmoid",
    "hardswish", "softsign", "logsigmoid", "hardshrink", "softshrink",
]
