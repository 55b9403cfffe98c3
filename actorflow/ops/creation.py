"""Ops that create tensors from attrs: constants, ranges, identity matrices and random draws.

They have no tensor inputs, so a Graph traces them as ops of their own. Random ops are flagged
``random=True``: the dispatcher gives each call a fresh ``seed`` from the global generator.
"""
from __future__ import annotations

import operator

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.registry import Meta, fail, register
from actorflow.random import numpy_rng


def as_size_int(owner: str, what: str, value) -> int:
    """``value`` as a Python int (ints, NumPy integers, integer 0-d tensors: anything with
    ``__index__``); a float, string or other value raises a TypeError naming ``owner`` and
    ``what``, never truncated or parsed (PyTorch refuses them too)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{owner}: {what} must be an int, got {type(value).__name__} "
                        f"{value!r}") from None


def as_shape(op_name: str, size) -> tuple:
    """``size`` (ints, or one tuple/list/Size of ints) as a tuple of non-negative ints; a
    float, string or negative size raises, naming the op."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = tuple(as_size_int(op_name, f"size[{i}] (of {tuple(size)!r})", s)
                  for i, s in enumerate(size))
    if any(s < 0 for s in shape):
        raise ValueError(f"{op_name}: size {shape} has a negative dimension")
    return shape


def _meta_from_attrs(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), attrs["dtype"])]


constant = register("constant", doc="A tensor filled with one value.")
constant.infer(_meta_from_attrs)


@constant.kernel("cpu")
def _(ins, outs, attrs):
    outs[0].fill(attrs["value"])


arange = register("arange", doc="Values from start to end (exclusive) by step.")


@arange.infer
def _(inputs, attrs):
    start, end, step = attrs["start"], attrs["end"], attrs["step"]
    if step == 0:
        raise ValueError("step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError(f"upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    n = int(np.ceil((end - start) / step))
    return [Meta((max(n, 0),), attrs["dtype"])]


@arange.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    out[...] = attrs["start"] + np.arange(out.shape[0], dtype=np.float64) * attrs["step"]


linspace = register("linspace", doc="``steps`` evenly spaced values from start to end.")


@linspace.infer
def _(inputs, attrs):
    if attrs["steps"] < 0:
        raise ValueError("number of steps must be non-negative")
    return [Meta((attrs["steps"],), attrs["dtype"])]


@linspace.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.linspace(attrs["start"], attrs["end"], attrs["steps"])


eye = register("eye", doc="An identity matrix (n x m).")


@eye.infer
def _(inputs, attrs):
    return [Meta((attrs["n"], attrs["m"]), attrs["dtype"])]


@eye.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.eye(attrs["n"], attrs["m"])


# ---- random ----------------------------------------------------------------------------------

uniform = register("uniform", random=True, doc="Uniform values in [low, high).")
uniform.infer(_meta_from_attrs)


@uniform.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    r = numpy_rng(attrs["seed"]).random(out.shape, dtype=np.float64 if out.dtype == np.float64
                                        else np.float32)
    lo, hi = attrs.get("low", 0.0), attrs.get("high", 1.0)
    np.copyto(out, r * (hi - lo) + lo if (lo, hi) != (0.0, 1.0) else r, casting="unsafe")
    # rounding to a narrow dtype (float16, bfloat16) can reach ``high``: keep the range half-open
    top = np.array(hi, dtype=out.dtype)
    over = out >= top
    if over.any():
        out[over] = np.nextafter(top, np.array(lo, dtype=out.dtype))


normal = register("normal", random=True, doc="Normal values with mean and std.")


@normal.infer
def _(inputs, attrs):
    std = attrs.get("std", 1.0)
    if not std >= 0:  # also NaN, as PyTorch
        fail("normal", f"std must be >= 0, got {std}")
    return _meta_from_attrs(inputs, attrs)


@normal.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    r = numpy_rng(attrs["seed"]).standard_normal(
        out.shape, dtype=np.float64 if out.dtype == np.float64 else np.float32)
    mean, std = attrs.get("mean", 0.0), attrs.get("std", 1.0)
    np.copyto(out, r * std + mean if (mean, std) != (0.0, 1.0) else r, casting="unsafe")


randint = register("randint", random=True, doc="Integers in [low, high).")


@randint.infer
def _(inputs, attrs):
    if attrs["high"] <= attrs["low"]:
        raise ValueError(f"randint: low ({attrs['low']}) must be < high ({attrs['high']})")
    return _meta_from_attrs(inputs, attrs)


@randint.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    out[...] = numpy_rng(attrs["seed"]).integers(attrs["low"], attrs["high"], out.shape)


randperm = register("randperm", random=True, doc="A random permutation of 0..n-1.")


@randperm.infer
def _(inputs, attrs):
    return [Meta((attrs["n"],), attrs["dtype"])]


@randperm.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = numpy_rng(attrs["seed"]).permutation(attrs["n"])


bernoulli = register("bernoulli", random=True, doc="0/1 draws with probabilities from input.")


@bernoulli.infer
def _(inputs, attrs):
    p = inputs[0]
    if attrs.get("p") is not None and not 0 <= attrs["p"] <= 1:
        fail("bernoulli", f"p must be in [0, 1], got {attrs['p']}")
    return [Meta(p._shape, attrs.get("dtype") or p.dtype)]


@bernoulli.kernel("cpu")
def _(ins, outs, attrs):
    p = ins[0]
    if attrs.get("p") is not None:
        p = np.full(outs[0].shape, attrs["p"])
    elif p.size and not (np.min(p) >= 0 and np.max(p) <= 1):  # NaN fails too, as PyTorch
        bad = p[~((p >= 0) & (p <= 1))].flat[0]
        raise ValueError(f"bernoulli: probabilities must be in [0, 1], got {bad}")
    r = numpy_rng(attrs["seed"]).random(outs[0].shape)
    outs[0][...] = r < p


@bernoulli.grad
def _(ctx, dout):
    return F.zeros_like(ctx.inputs[0])


