"""Quantization ops (OneFlow's): observers that derive a scale and zero point from a tensor's
range, ``quantization`` (values to integer levels, kept in the input's float dtype) and
``fake_quantization`` (to the levels and back; its gradient passes straight through).

Attrs shared by all: ``quantization_formula`` ("google": scale and zero point; "cambricon":
a power-of-two shift, per layer only), ``quantization_bit`` (2..8), ``quantization_scheme``
("symmetric": signed levels [-2^(b-1), 2^(b-1)-1], zero point 0; "affine": unsigned levels
[0, 2^b-1] with a zero point). Per-channel scales (one per index of dim 0) apply when the scale
has more than one element. Rounding is half to even, as OneFlow's kernels (``nearbyint``); the
affine zero point is rounded half away from zero and taken as an unsigned byte.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops.registry import Meta, fail, register

_FORMULAS = ("google", "cambricon")
_SCHEMES = ("symmetric", "affine")


def _check_attrs(name: str, attrs: dict, x) -> None:
    formula, scheme, bit = (attrs["quantization_formula"], attrs["quantization_scheme"],
                            attrs["quantization_bit"])
    if formula not in _FORMULAS:
        fail(name, f"quantization_formula must be one of {_FORMULAS}, got {formula!r}")
    if scheme not in _SCHEMES:
        fail(name, f"quantization_scheme must be one of {_SCHEMES}, got {scheme!r}")
    if not 2 <= int(bit) <= 8:
        fail(name, f"quantization_bit must be in [2, 8], got {bit}")
    if not x.dtype.is_floating_point:
        fail(name, f"expects a floating-point input, got {x.dtype}", x._shape)


def _round_away(v: np.ndarray) -> np.ndarray:
    """C's ``round``: halves away from zero."""
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def _range_scale(vmax, vmin, bit: int, scheme: str, formula: str):
    """(scale, zero_point) of a range; for "symmetric"/"cambricon" ``vmax`` is max |x|."""
    if formula == "cambricon":
        with np.errstate(divide="ignore"):
            return np.floor(np.log2(vmax)) - (bit - 2), np.zeros_like(vmax)
    if scheme == "symmetric":
        return vmax / (2.0 ** (bit - 1) - 1), np.zeros_like(vmax)
    scale = (vmax - vmin) / (2.0 ** bit - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return scale, vmin / scale


# ---- min_max_observer ----------------------------------------------------------------------------

min_max_observer = register(
    "min_max_observer",
    doc="Scale and zero point of x from its min and max (input x; attrs quantization_formula, "
        "quantization_bit, quantization_scheme, per_layer_quantization); outputs scale, "
        "zero_point, one element per layer or per index of dim 0.")


@min_max_observer.infer
def _(inputs, attrs):
    x = inputs[0]
    _check_attrs("min_max_observer", attrs, x)
    per_layer = attrs["per_layer_quantization"]
    if attrs["quantization_formula"] == "cambricon" and not per_layer:
        fail("min_max_observer", "the cambricon formula supports per-layer quantization only")
    if not per_layer and len(x._shape) == 0:
        fail("min_max_observer", "per-channel quantization needs at least 1 dim", x._shape)
    n = 1 if per_layer else x._shape[0]
    return [Meta((n,), x.dtype), Meta((n,), x.dtype)]


@min_max_observer.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    rows = x.reshape(outs[0].shape[0], -1)
    vmax, vmin = rows.max(axis=1), rows.min(axis=1)
    scheme, formula = attrs["quantization_scheme"], attrs["quantization_formula"]
    if scheme == "symmetric" or formula == "cambricon":
        vmax = np.maximum(np.abs(vmax), np.abs(vmin))
    scale, zp_raw = _range_scale(vmax, vmin, int(attrs["quantization_bit"]), scheme, formula)
    outs[0][...] = scale
    outs[1][...] = -np.rint(zp_raw) if scheme == "affine" and formula == "google" else 0


# ---- moving_average_min_max_observer -------------------------------------------------------------

moving_average_min_max_observer = register(
    "moving_average_min_max_observer", mutates=(2, 3),
    doc="Per-layer scale and zero point from a moving average of x's range (inputs x, "
        "current_train_step (int64), moving_max, moving_min - the last two updated in place "
        "while training and current_train_step <= stop_update_after_iters; a zero moving value "
        "starts from the batch's); attrs training, stop_update_after_iters, momentum and the "
        "quantization attrs; outputs scale, zero_point of shape (1,).")


@moving_average_min_max_observer.infer
def _(inputs, attrs):
    x = inputs[0]
    _check_attrs("moving_average_min_max_observer", attrs, x)
    for t, what in ((inputs[2], "moving_max"), (inputs[3], "moving_min")):
        if int(np.prod(t._shape)) != 1 or t.dtype != x.dtype:
            fail("moving_average_min_max_observer", f"{what} must hold one {x.dtype} value, "
                 f"got {t.dtype}", t._shape)
    return [Meta((1,), x.dtype), Meta((1,), x.dtype)]


@moving_average_min_max_observer.kernel("cpu")
def _(ins, outs, attrs):
    x, step, mmax, mmin = ins
    scheme, formula = attrs["quantization_scheme"], attrs["quantization_formula"]
    momentum = attrs["momentum"]
    mmax, mmin = mmax.reshape(1), mmin.reshape(1)
    if attrs["training"] and int(step.reshape(-1)[0]) <= attrs["stop_update_after_iters"]:
        vmax, vmin = x.max(), x.min()
        if scheme == "symmetric" or formula == "cambricon":
            vmax = max(abs(vmax), abs(vmin))
        mmax[0] = vmax if mmax[0] == 0 else mmax[0] * momentum + vmax * (1 - momentum)
        if scheme == "affine" and formula == "google":
            mmin[0] = vmin if mmin[0] == 0 else mmin[0] * momentum + vmin * (1 - momentum)
        else:
            mmin[0] = mmax[0]
    scale, zp_raw = _range_scale(mmax, mmin, int(attrs["quantization_bit"]), scheme, formula)
    outs[0][...] = scale
    outs[1][...] = -_round_away(zp_raw) if scheme == "affine" and formula == "google" else 0


# ---- quantization / fake_quantization ------------------------------------------------------------

def _quant_infer(name: str):
    def infer(inputs, attrs):
        x, scale, zp = inputs
        _check_attrs(name, attrs, x)
        n = int(np.prod(scale._shape))
        if n > 1 and (len(x._shape) == 0 or x._shape[0] != n):
            fail(name, "a per-channel scale needs one element per index of dim 0", x._shape,
                 scale._shape)
        if int(np.prod(zp._shape)) != n:
            fail(name, "scale and zero_point must have as many elements", scale._shape,
                 zp._shape)
        if n > 1 and attrs["quantization_formula"] == "cambricon":
            fail(name, "the cambricon formula supports per-layer quantization only",
                 scale._shape)
        return [Meta(x._shape, x.dtype)]
    return infer


def _levels(ins, attrs):
    """(x as rows per scale, integer levels, scale column, zero-point column)."""
    x, scale, zp = ins
    bit, scheme = int(attrs["quantization_bit"]), attrs["quantization_scheme"]
    n = scale.size
    rows = x.reshape(n, -1) if x.size else x.reshape(n, 0)
    s = scale.reshape(n, 1).astype(x.dtype)
    if attrs["quantization_formula"] == "cambricon":
        s = np.power(2.0, s.astype(np.int32)).astype(x.dtype)
        scheme = "symmetric"
    if scheme == "symmetric":
        hi = 2.0 ** (bit - 1) - 1
        z = np.zeros((n, 1), x.dtype)
        lo = -hi - 1
    else:
        hi, lo = 2.0 ** bit - 1, 0.0
        z = (_round_away(zp.reshape(n, 1).astype(np.float64)).astype(np.int64) % 256)
        z = z.astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.clip(np.rint(rows / s + z), lo, hi)
    return q, s, z


quantization = register(
    "quantization",
    doc="x to integer levels round(x / scale [+ zero_point]) clipped to the scheme's range, "
        "kept in x's dtype (inputs x, scale, zero_point; the quantization attrs).")
quantization.infer(_quant_infer("quantization"))


@quantization.kernel("cpu")
def _(ins, outs, attrs):
    q, _, _ = _levels(ins, attrs)
    outs[0][...] = q.reshape(outs[0].shape)


fake_quantization = register(
    "fake_quantization",
    doc="x quantized and dequantized: (levels - zero_point) * scale (inputs x, scale, "
        "zero_point; the quantization attrs). The gradient passes to x unchanged "
        "(straight-through).")
fake_quantization.infer(_quant_infer("fake_quantization"))


@fake_quantization.kernel("cpu")
def _(ins, outs, attrs):
    q, s, z = _levels(ins, attrs)
    outs[0][...] = ((q - z) * s).reshape(outs[0].shape)


@fake_quantization.grad
def _(ctx, dout):
    return dout, None, None
