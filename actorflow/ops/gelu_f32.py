"""The float32 GELU kernels (exact and tanh forms, forward and gradient): blocks of in-place
NumPy passes with one exp per element, writing straight into the output.

A NumPy pass over float32 data costs about a tenth of an exp (and a twentieth of a tanh), so
these kernels count passes. ``activation`` registers the ops and keeps the float64 paths.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.ops.parallel import parallel_for
from actorflow.ops.registry import CRow

# Abramowitz & Stegun 7.1.26: erf(x) = 1 - poly(t) exp(-x^2), t = 1 / (1 + p x), |error| < 1.5e-7
AS_P = 0.3275911
AS_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_C = 0.044715

# gelu(x) = x Phi(x) is computed as x / (1 + exp(-L(x))), with
# L = logit(Phi) ~ x P(x^2): P's degree-6 coefficients were fitted here (weighted least squares
# with Lawson reweighting on [0, 6], float64) to 2e-7 of |gelu(-|x|)| or 5e-8 absolute, before
# float32 rounding; beyond |x| = 6, |L| > 23 and the result is x or ~0, as it should be.
# gelu' comes from A&S 7.1.26 for Q(a) = Phi(-a) = erfc(a/sqrt2)/2 (absolute error < 7.5e-8):
#   Q(a) = K m(t) exp(-a^2/2),  t = 1 / (1 + p a / sqrt2),  m(t) = t (b5 + t (b4 + ... (b2 + t)))
#   gelu'(x) = Phi(x) + x phi(x) = 0.5 + sign(x) (0.5 - Q(a) + a phi(a)),  a = |x|
# where phi(a) = exp(-a^2/2) / sqrt(2 pi) shares Q's exponential. While autograd records, the
# forward also writes Phi(x) = 1 / (1 + exp(-L)) (one more pass), and the gradient is then
# Phi + x phi: one exp and a few passes instead of A&S's dozen. The tanh form is
# x sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): one exp, no tanh.
_GELU_BLOCK = 1 << 17  # elements per block: scratch stays in cache; blocks spread over threads
# -P, lowest degree first
_GELU_NEG_P = tuple(np.float32(-c) for c in (
    1.5957698829, 7.2666169149e-02, -6.5189952441e-05, -1.1061238684e-04, 7.9294887220e-06,
    -2.6452666924e-07, 3.5123411679e-09))
_GELU_T = np.float32(AS_P * math.sqrt(0.5))
_GELU_B = tuple(np.float32(c / AS_A[0]) for c in AS_A[1:])  # A&S's polynomial made monic
_GELU_LNK = np.float32(math.log(0.5 * AS_A[0]))  # K = a1 / 2, folded into the exponent
_GELU_PHI = np.float32(_INV_SQRT_2PI / (0.5 * AS_A[0]))  # phi(a) = this * K exp(-a^2/2)
_TANH_A = np.float32(-2 * _SQRT_2_OVER_PI)  # -2u = x (_TANH_A + _TANH_B x^2)
_TANH_B = np.float32(-2 * _SQRT_2_OVER_PI * GELU_C)
_TANH_G = np.float32(2 * _SQRT_2_OVER_PI)  # 2u' = _TANH_G + _TANH_D x^2
_TANH_D = np.float32(6 * _SQRT_2_OVER_PI * GELU_C)
_F32_SIGN = np.int32(-2 ** 31)
_LN_INV_SQRT_2PI = np.float32(math.log(_INV_SQRT_2PI))
_HALF, _ONE = np.float32(0.5), np.float32(1.0)


def _gelu_q(x, a, t, q, e) -> None:
    """a = |x|, q = m(t), e = K exp(-x^2/2) (so Q(a) = q e); t is left as scratch."""
    np.abs(x, out=a)
    np.multiply(a, _GELU_T, out=t)
    t += _ONE
    np.reciprocal(t, out=t)
    np.add(t, _GELU_B[0], out=q)
    for b in _GELU_B[1:]:
        q *= t
        q += b
    q *= t
    np.multiply(a, np.float32(-0.5), out=e)
    e *= a
    e += _GELU_LNK
    np.exp(e, out=e)


def _gelu_block(o, x, s, q) -> None:
    _gelu_logistic(x, s, q)
    np.divide(x, q, out=o)


def _gelu_cdf_block(o, c, x, s, q) -> None:
    _gelu_logistic(x, s, q)
    np.divide(x, q, out=o)  # as _gelu_block: the same bits whether Phi is saved or not
    np.reciprocal(q, out=c)


def _gelu_logistic(x, s, q) -> None:
    """q = 1 + exp(-L(x)), so Phi(x) = 1 / q (s is scratch)."""
    np.multiply(x, x, out=s)
    np.multiply(s, _GELU_NEG_P[-1], out=q)
    q += _GELU_NEG_P[-2]
    for c in _GELU_NEG_P[-3::-1]:
        q *= s
        q += c
    q *= x
    np.exp(q, out=q)
    q += _ONE


def _gelu_grad_block(o, g, x, a, t, q, e) -> None:
    _gelu_q(x, a, t, q, e)
    np.multiply(a, _GELU_PHI, out=t)
    q -= t
    q *= e  # Q(a) - a phi(a), at most 0.5
    np.subtract(_HALF, q, out=q)
    sign, qi = t.view(np.int32), q.view(np.int32)
    np.bitwise_and(x.view(np.int32), _F32_SIGN, out=sign)
    np.bitwise_xor(qi, sign, out=qi)  # copysign for q >= 0, several times faster
    q += _HALF
    np.multiply(g, q, out=o)


def _gelu_tanh_block(o, x, e) -> None:
    np.multiply(x, x, out=e)
    e *= _TANH_B
    e += _TANH_A
    e *= x
    np.exp(e, out=e)
    e += _ONE
    np.divide(x, e, out=o)


def _gelu_grad_cdf_block(o, g, x, c, e) -> None:
    # gelu' = Phi + x phi, Phi saved by the forward: phi's exponential is all that is left
    np.multiply(x, np.float32(-0.5), out=e)
    e *= x
    e += _LN_INV_SQRT_2PI
    np.exp(e, out=e)
    e *= x
    e += c
    np.multiply(g, e, out=o)


def _gelu_tanh_grad_block(o, g, x, w, e, s) -> None:
    # gelu' = s (1 + (1 - s) x 2u'), s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u); 1 - s is
    # taken as 1 / (1 + 1/e): no cancellation where s is near 1, none of inf * 0 where e is inf
    np.multiply(x, x, out=w)
    np.multiply(w, _TANH_B, out=e)
    e += _TANH_A
    e *= x
    np.exp(e, out=e)
    np.add(e, _ONE, out=s)
    np.reciprocal(s, out=s)
    np.reciprocal(e, out=e)
    e += _ONE
    np.reciprocal(e, out=e)
    w *= _TANH_D
    w += _TANH_G
    w *= x
    e *= w
    e += _ONE
    e *= s
    np.multiply(g, e, out=o)


def _run_blocks(block, n_scratch: int, outs: list, *arrays: np.ndarray) -> None:
    """Run ``block(*out_parts, *array_parts, *scratch)`` over float32 blocks of ``arrays``
    (broadcast to the outputs' shape), spread over the intra-op threads. A block reads only its
    own part of the inputs and writes its outputs last, so an output may be one of the inputs
    (fused programs run ops in place)."""
    shape = outs[0].shape
    res = [o if o.dtype == np.float32 and o.flags.c_contiguous else np.empty(shape, np.float32)
           for o in outs]
    flat = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype=np.float32).reshape(-1)
            for a in arrays]
    n = res[0].size
    step = min(n, _GELU_BLOCK)
    if step:
        rf = [r.reshape(-1) for r in res]

        def run(k: int) -> None:
            i = k * step
            j = min(i + step, n)
            scratch = [np.empty(j - i, np.float32) for _ in range(n_scratch)]
            with np.errstate(all="ignore"):
                block(*(r[i:j] for r in rf), *(a[i:j] for a in flat), *scratch)
        parallel_for(-(-n // step), run)
    for o, r in zip(outs, res):
        if r is not o:
            np.copyto(o, r, casting="unsafe")


def gelu_f32(x: np.ndarray, out: np.ndarray, approximate: str,
             cdf: np.ndarray | None = None) -> None:
    """``out = gelu(x)`` computed in float32 (``approximate``: "none" or "tanh"); with ``cdf``
    (exact form only), also Phi(x), which ``gelu_grad_f32`` can then read instead of
    recomputing it."""
    if approximate == "tanh":
        if cdf is not None:
            raise ValueError("gelu: only the exact form saves Phi(x)")
        _run_blocks(_gelu_tanh_block, 1, [out], x)
    elif cdf is None:
        _run_blocks(_gelu_block, 2, [out], x)
    else:
        _run_blocks(_gelu_cdf_block, 2, [out, cdf], x)


def gelu_grad_f32(g: np.ndarray, x: np.ndarray, out: np.ndarray, approximate: str,
                  cdf: np.ndarray | None = None) -> None:
    """``out = g * gelu'(x)`` computed in float32, from ``cdf`` (Phi(x), saved by the exact
    form's forward) when given."""
    if approximate == "tanh":
        if cdf is not None:
            raise ValueError("gelu_grad: only the exact form reads a saved Phi(x)")
        _run_blocks(_gelu_tanh_grad_block, 3, [out], g, x)
    elif cdf is None:
        _run_blocks(_gelu_grad_block, 4, [out], g, x)
    else:
        _run_blocks(_gelu_grad_cdf_block, 1, [out], g, x, cdf)


# ---- the same kernels as row forms for generated C (ops/registry.py: c_row) -----------------
# float32 (and narrower, computed in float32): the passes above, one element at a time, with
# af_exp (the generator's vectorisable exp); float64: activation's float64 formulas in libm.

def _f(c) -> str:
    """A float32 constant as an exact C float literal."""
    return f"{float(np.float32(c))!r}f"


def _horner_neg_p() -> str:
    p = _GELU_NEG_P
    lines = [f"float q = AF_FMA(s, {_f(p[-1])}, {_f(p[-2])});"]
    lines += [f"q = AF_FMA(q, s, {_f(c)});" for c in p[-3::-1]]
    return " ".join(lines)


_ROW_GELU = {
    "none": (f"const float s = x * x; {_horner_neg_p()} q = af_exp(q * x) + 1.0f;"
             f" y = x / q; c = 1.0f / q;",
             "c = 0.5 * (1.0 + erf(x * 0.70710678118654752440)); y = x * c;"),
    "tanh": (f"float e = (x * x) * {_f(_TANH_B)} + {_f(_TANH_A)}; e = af_exp(e * x) + 1.0f;"
             f" y = x / e;",
             f"c = 0.5 * (1.0 + tanh({_SQRT_2_OVER_PI!r} * (x + {GELU_C!r} * x * x * x)));"
             f" y = x * c;"),
}

_ROW_GELU_GRAD = {
    # without a saved Phi(x): Phi(x) as gelu's row form computes it (the value it would have
    # saved), then the same Phi + x phi
    ("none", 2): (f"const float s = x * x; {_horner_neg_p()} q = af_exp(q * x) + 1.0f;"
                  f" float e = (x * -0.5f) * x + {_f(_LN_INV_SQRT_2PI)};"
                  f" e = af_exp(e) * x + 1.0f / q; d = e;",
                  f"d = 0.5 * (1.0 + erf(x * 0.70710678118654752440))"
                  f" + x * exp(-0.5 * x * x) * {_INV_SQRT_2PI!r};"),
    ("none", 3): (f"float e = (x * -0.5f) * x + {_f(_LN_INV_SQRT_2PI)}; e = af_exp(e) * x + X2(i);"
                  f" d = e;",
                  f"d = X2(i) + x * exp(-0.5 * x * x) * {_INV_SQRT_2PI!r};"),
    ("tanh", 2): (f"const float w = x * x; float e = w * {_f(_TANH_B)} + {_f(_TANH_A)};"
                  f" e = af_exp(e * x); const float sg = 1.0f / (e + 1.0f);"
                  f" e = 1.0f / (1.0f / e + 1.0f);"
                  f" const float u = (w * {_f(_TANH_D)} + {_f(_TANH_G)}) * x;"
                  f" d = (e * u + 1.0f) * sg;",
                  f"const double x2 = x * x, t = tanh({_SQRT_2_OVER_PI!r} * x * (1.0 + "
                  f"{GELU_C!r} * x2)); d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * "
                  f"{_SQRT_2_OVER_PI!r} * (1 + 3 * {GELU_C!r} * x2);"),
}


def _per_type(f32: str, f64: str) -> str:
    return (f"if (sizeof($T) == 4) {{ const float x = (float)x_; {f32} }}\n"
            f"else {{ const double x = (double)x_; {f64} }}")


def gelu_c_row(attrs: dict, n_inputs: int):
    """gelu's row form: inputs (x,), outputs (y, [Phi(x) when save_cdf])."""
    forms = _ROW_GELU.get(attrs.get("approximate"))
    if forms is None or n_inputs != 1:
        return None
    save = bool(attrs.get("save_cdf"))
    if save and attrs.get("approximate") != "none":
        return None
    store = "Y0(i, y); Y1(i, c);" if save else "Y0(i, y);"
    return CRow(f"for (int64_t i = 0; i < n; i++) {{\n const $T x_ = X0(i); $T y, c = 0; "
                f"(void)c;\n{_per_type(*forms)}\n {store}\n}}", ("row", "row") + ("row",) * save,
                in_place=((0, 0),))


def gelu_grad_c_row(attrs: dict, n_inputs: int):
    """gelu_grad's row form: inputs (dout, x, [Phi(x)]), output dx (without a saved Phi(x),
    the exact form recomputes it as gelu's row form does; the NumPy kernel's float32 bit
    tricks give the same within a few ulps)."""
    forms = _ROW_GELU_GRAD.get((attrs.get("approximate"), n_inputs))
    if forms is None:
        return None
    return CRow(f"for (int64_t i = 0; i < n; i++) {{\n const $T x_ = X1(i); $T d;\n"
                f"{_per_type(*forms)}\n Y0(i, d * X0(i));\n}}", ("row",) * (n_inputs + 1),
                in_place=tuple((0, a) for a in range(n_inputs)))


_ROW_GELU_WITH_GRAD = {
    # gelu's row form and gelu_grad's without a saved Phi(x), sharing Phi(x): the same values
    "none": (f"const float s = x * x; {_horner_neg_p()} q = af_exp(q * x) + 1.0f;"
             f" y = x / q; const float c = 1.0f / q;"
             f" float e = (x * -0.5f) * x + {_f(_LN_INV_SQRT_2PI)}; e = af_exp(e) * x + c; d = e;",
             "const double c = 0.5 * (1.0 + erf(x * 0.70710678118654752440)); y = x * c;"
             f" d = c + x * exp(-0.5 * x * x) * {_INV_SQRT_2PI!r};"),
    "tanh": (f"const float w = x * x; float e = w * {_f(_TANH_B)} + {_f(_TANH_A)};"
             f" e = af_exp(e * x); y = x / (e + 1.0f); const float sg = 1.0f / (e + 1.0f);"
             f" e = 1.0f / (1.0f / e + 1.0f);"
             f" const float u = (w * {_f(_TANH_D)} + {_f(_TANH_G)}) * x;"
             f" d = (e * u + 1.0f) * sg;",
             f"y = x * (0.5 * (1.0 + tanh({_SQRT_2_OVER_PI!r} * (x + {GELU_C!r} * x * x * x))));"
             f" const double x2 = x * x, t = tanh({_SQRT_2_OVER_PI!r} * x * (1.0 + "
             f"{GELU_C!r} * x2)); d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * "
             f"{_SQRT_2_OVER_PI!r} * (1 + 3 * {GELU_C!r} * x2);"),
}


def gelu_with_grad_c_row(attrs: dict, n_inputs: int):
    """gelu_with_grad's row form: inputs (dout, x), outputs (gelu(x), dout * gelu'(x)), each
    computed as gelu's and gelu_grad's row forms compute it (without a saved Phi(x))."""
    forms = _ROW_GELU_WITH_GRAD.get(attrs.get("approximate"))
    if forms is None or n_inputs != 2:
        return None
    return CRow(f"for (int64_t i = 0; i < n; i++) {{\n const $T x_ = X1(i); $T y, d;\n"
                f"{_per_type(*forms)}\n Y0(i, y); Y1(i, d * X0(i));\n}}", ("row",) * 4,
                in_place=((0, 1), (1, 0)))
