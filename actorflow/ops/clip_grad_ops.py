"""Gradient clipping ops: ``grad_norm`` (the norm of several tensors taken together),
``clip_grad_by_norm`` and ``clip_grad_by_value`` (both in place, on a gradient). They back
``nn.utils.clip_grad_norm_`` / ``clip_grad_value_`` (``optim/clip_grad.py``) and the clipping
an ``nn.Graph`` emits for param groups with ``clip_grad_max_norm``."""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.boxing import B, Sig
from actorflow.ops.reduce_form import ReduceForm
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


# The same norms in generated C (ops/reduce_form.py), in the NumPy kernel's types: p = 2 sums
# each tensor's squares in its computing type (np.dot: float for float32 and the half types,
# double for float64), p = 1 sums |x| in double, inf / -inf take the extreme |x| with a flag
# that any element was NaN; the tensors' values are then combined in double, as the kernel's
# Python does. AF_ISNAN tests the bits (the generator's helper: a comparison x != x on a
# converted half is narrowed to a call per element). Other norm types keep the NumPy kernel.
_EXTREME_TOTAL = "t = (v != v || t != t) ? (double)NAN : (v {} t ? v : t);"
_NORM_FORMS = {
    2.0: ReduceForm((("s", "T", "0", "+"),), "s += x * x;", "s += s_b;", "(double)s", "0.0",
                    "t += v;", "sqrt(t)"),
    1.0: ReduceForm((("s", "double", "0", "+"),), "s += (double)fabs(x);", "s += s_b;", "s",
                    "0.0", "t += v;", "t"),
    math.inf: ReduceForm(
        (("m", "T", "0", "max"), ("bad", "T", "0", "max")),
        "const T a_ = fabs(x); m = a_ > m ? a_ : m; bad = AF_ISNAN(x) ? (T)1 : bad;",
        "m = m_b > m ? m_b : m; bad = bad_b > bad ? bad_b : bad;",
        "bad ? (double)NAN : (double)m", "0.0", _EXTREME_TOTAL.format(">"), "t"),
    -math.inf: ReduceForm(
        (("m", "T", "INFINITY", "min"), ("bad", "T", "0", "max")),
        "const T a_ = fabs(x); m = a_ < m ? a_ : m; bad = AF_ISNAN(x) ? (T)1 : bad;",
        "m = m_b < m ? m_b : m; bad = bad_b > bad ? bad_b : bad;",
        "bad ? (double)NAN : (double)m", "INFINITY", _EXTREME_TOTAL.format("<"), "t"),
}


def _norm_c(attrs: dict) -> ReduceForm | None:
    return _NORM_FORMS.get(float(attrs["norm_type"]))


grad_norm.c_reduce = _norm_c  # one pass over all gradients in generated C (c_reduce)


def clip_coefficient(total: float, max_norm: float) -> float:
    """The factor ``clip_grad_by_norm`` scales a gradient by, given the total norm (a Python
    float): ``min(max_norm / (total + 1e-6), 1)``, NaN for a NaN norm (the op's
    ``grad_scale``: a fused update that clips takes it from the record)."""
    return min(max_norm / (total + 1e-6), 1.0) if not math.isnan(total) else total


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
    coef = clip_coefficient(float(ins[1].reshape(())), attrs["max_norm"])
    if coef != 1.0:
        g *= coef


# the factor of the kernel above, for a multi_tensor_update that clips (registry: grad_scale)
clip_grad_by_norm.grad_scale = lambda values, attrs: clip_coefficient(values[0],
                                                                      attrs["max_norm"])


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
