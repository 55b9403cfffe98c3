"""Gradient clipping ops: ``grad_norm`` (the norm of several tensors taken together),
``clip_grad_by_norm`` and ``clip_grad_by_value`` (both in place, on a gradient). They back
``nn.utils.clip_grad_norm_`` / ``clip_grad_value_`` (``optim/clip_grad.py``) and the clipping
an ``nn.Graph`` emits for param groups with ``clip_grad_max_norm``."""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.boxing import B, Sig
from actorflow.ops.registry import Meta, fail, register


grad_norm = register(
    "grad_norm", amp="deny",
    doc="The norm of several tensors taken together (as if concatenated); 0-d output. "
        "norm_type p: (sum |x|^p)^(1/p); inf / -inf: max / min |x|; 0: the number of tensors "
        "that have a non-zero element (the 0-norm of the per-tensor 0-norms, as PyTorch).")


@grad_norm.infer
def _(inputs, attrs):
    if not inputs:
        fail("grad_norm", "expected at least one tensor")
    d = inputs[0].dtype
    for t in inputs:
        if not t.dtype.is_floating_point:
            fail("grad_norm", f"expected floating point tensors, got {t.dtype}")
        d = dt.promote_types(d, t.dtype)
    return [Meta((), d)]


@grad_norm.kernel("cpu")
def _(ins, outs, attrs):
    p = float(attrs["norm_type"])
    # half-precision gradients are summed in float32 (their squares overflow float16)
    arrays = [a.reshape(-1) if a.dtype.itemsize >= 4 else a.reshape(-1).astype(np.float32)
              for a in ins if a.size]
    if not arrays:
        outs[0][...] = 0.0
        return
    if p == math.inf or p == -math.inf:
        # np.max / np.min propagate NaN within a tensor; across tensors a NaN anywhere gives
        # NaN too (Python's max / min would keep or drop it by the tensors' order)
        ext = [float(np.max(np.abs(a)) if p > 0 else np.min(np.abs(a))) for a in arrays]
        total = math.nan if any(math.isnan(v) for v in ext) else (max(ext) if p > 0
                                                                  else min(ext))
    elif p == 0:
        total = float(sum(bool(np.any(a != 0)) for a in arrays))
    elif p == 1:
        total = sum(float(np.sum(np.abs(a), dtype=np.float64)) for a in arrays)
    elif p == 2:
        total = math.sqrt(sum(float(np.dot(a, a)) for a in arrays))
    else:
        with np.errstate(divide="ignore"):
            s = sum(float(np.sum(np.power(np.abs(a, dtype=np.float64), p))) for a in arrays)
            total = float(np.power(s, 1.0 / p))
    outs[0][...] = total


clip_grad_by_norm = register(
    "clip_grad_by_norm", mutates=(0,), amp="deny",
    doc="In place: grad *= min(max_norm / (total_norm + 1e-6), 1) (inputs: grad, total_norm).")


@clip_grad_by_norm.infer
def _(inputs, attrs):
    g, norm = inputs
    if not g.dtype.is_floating_point:
        fail("clip_grad_by_norm", f"expected a floating point gradient, got {g.dtype}")
    if math.prod(norm._shape) != 1:
        fail("clip_grad_by_norm", "total_norm must have one element", norm._shape)
    return []


@clip_grad_by_norm.sbp
def _(inputs, attrs):
    # a scaling by one broadcast factor: split or partial-sum gradients scale shard by shard
    g = inputs[0].sbp[0].attr()
    if g != B:
        yield Sig((g, B), ())


@clip_grad_by_norm.kernel("cpu")
def _(ins, outs, attrs):
    g = ins[0]
    total = float(ins[1].reshape(()))
    coef = min(attrs["max_norm"] / (total + 1e-6), 1.0) if not math.isnan(total) else total
    if coef != 1.0:
        g *= coef


clip_grad_by_value = register(
    "clip_grad_by_value", mutates=(0,),
    doc="In place: grad = clamp(grad, -clip_value, clip_value).", amp="deny")


@clip_grad_by_value.infer
def _(inputs, attrs):
    if not inputs[0].dtype.is_floating_point:
        fail("clip_grad_by_value", f"expected a floating point gradient, got {inputs[0].dtype}")
    return []


@clip_grad_by_value.sbp
def _(inputs, attrs):
    g = inputs[0].sbp[0].attr()  # elementwise, but not linear: a split gradient only
    if g[0] == "S":
        yield Sig((g,), ())


@clip_grad_by_value.kernel("cpu")
def _(ins, outs, attrs):
    v = attrs["clip_value"]
    np.clip(ins[0], -v, v, out=ins[0])
