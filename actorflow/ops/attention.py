"""Scaled dot-product attention as one op, and its gradient as one op.

``scaled_dot_product_attention``: inputs q (..., L, E), k (..., S, E), v (..., S, Ev) and an
optional mask broadcasting to (..., L, S): boolean (True = may attend) or additive (any other
dtype, added to the scaled scores). Attrs ``scale`` and ``is_causal`` (keys after each query are
masked, top-left aligned; not together with a mask). Batch dims broadcast like matmul. Outputs
``out`` (..., L, Ev) and the attention probabilities ``probs`` (..., L, S), which the gradient
reads. A row with no allowed key gets zero probabilities (and a zero output).

``scaled_dot_product_attention_grad``: inputs dout, q, k, v, probs, out [, dprobs] (a gradient
arriving at ``probs`` itself, from a gradient-of-gradient graph); outputs dq, dk, dv [, dmask]
(dmask when ``mask_shape`` is given: the gradient of an additive mask).

The kernels make few passes over the (L, S) arrays and few temporaries: the scores are computed
into the ``probs`` output and the masking and softmax run in place there.
Half-precision inputs compute in float32 and the results are written back in their dtype.
"""
from __future__ import annotations

import functools

import numpy as np

from actorflow.ops._common import F, broadcast_shapes, ones_vector, promote
from actorflow.ops.boxing import B, P, S, Sig, shard_range
from actorflow.ops.parallel import parallel_for, split
from actorflow.ops.registry import Meta, fail, register

_NAME = "scaled_dot_product_attention"
_GRAD = _NAME + "_grad"

sdpa = register(_NAME, grad_uses_outputs=True, amp="deny",
                doc="softmax(q @ k^T * scale + mask) @ v in one kernel; outputs out and the "
                    "attention probabilities (saved for backward).")


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the kernels compute in: float16/bfloat16 results are computed in float32."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _as(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return a if a.dtype == dtype else a.astype(dtype)


def _sum_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a broadcast result back to ``shape``."""
    if a.shape == shape:
        return a
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and a.shape[lead + i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)


def _store(target: np.ndarray, value: np.ndarray) -> None:
    if value is not target:
        np.copyto(target, value, casting="unsafe")


@functools.lru_cache(maxsize=64)
def _causal_bias(L: int, S: int, dtype: np.dtype) -> np.ndarray:
    """(L, S) additive causal mask: -inf where key j comes after query i, else 0 (read-only,
    shared)."""
    bias = np.zeros((L, S), dtype)
    bias[np.triu_indices(L, 1, S)] = -np.inf
    bias.flags.writeable = False
    return bias


def _batch(shape: tuple) -> tuple:
    return tuple(shape[:-2])


@sdpa.infer
def _(inputs, attrs):
    if len(inputs) not in (3, 4):
        fail(_NAME, f"expected inputs q, k, v and an optional mask, got {len(inputs)} inputs")
    q, k, v = inputs[:3]
    qs, ks, vs = tuple(q._shape), tuple(k._shape), tuple(v._shape)
    for name, t in (("query", q), ("key", k), ("value", v)):
        if len(t._shape) < 2:
            fail(_NAME, f"{name} needs at least 2 dims", qs, ks, vs)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{_NAME}: {name} must be a floating point tensor, got {t.dtype}")
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        fail(_NAME, "query/key embedding dims and key/value lengths must match", qs, ks, vs)
    L, S = qs[-2], ks[-2]
    lead = broadcast_shapes(_NAME, _batch(qs), _batch(ks))
    dtype_from = [q, k, v]
    if len(inputs) == 4:
        if attrs["is_causal"]:
            fail(_NAME, "pass either a mask or is_causal, not both")
        m = inputs[3]
        ms = tuple(m._shape)
        if len(ms) >= 1 and ms[-1] not in (1, S) or len(ms) >= 2 and ms[-2] not in (1, L):
            fail(_NAME, f"mask must broadcast to (..., {L}, {S})", qs, ks, ms)
        lead = broadcast_shapes(_NAME, lead, _batch(ms))
        if m.dtype.name != "bool":
            dtype_from.append(m)
    out_lead = broadcast_shapes(_NAME, lead, _batch(vs))
    dtype = promote(dtype_from)
    return [Meta(out_lead + (L, vs[-1]), dtype), Meta(lead + (L, S), dtype)]


def _mask_sbp(d: int, lead: tuple, ms: tuple) -> tuple | None:
    """The mask's SBP when the batch dim ``d`` of ``lead`` is split: split too where the mask
    has that dim, broadcast where it broadcasts there (size 1 or missing); None when the mask
    adds batch dims of its own."""
    if len(ms) - 2 > len(lead):
        return None
    dm = d - (len(lead) - (len(ms) - 2))
    return S(dm) if dm >= 0 and ms[dm] != 1 else B


def _batch_splits(q, k, v, mask_shape):
    """``(d, mask sbp)`` for each batch dim that q, k and v share (no broadcasting between
    them)."""
    lead = _batch(q._shape)
    if _batch(k._shape) != lead or _batch(v._shape) != lead:
        return
    for d in range(len(lead)):
        ms = None if mask_shape is None else _mask_sbp(d, lead, tuple(mask_shape))
        if mask_shape is None or ms is not None:
            yield d, ms


@sdpa.sbp
def _(inputs, attrs):
    """q, k, v split on a batch dim they share (a mask split there too, or broadcast where it
    broadcasts): out and probs split there. Heads and batch are independent."""
    mask = None if len(inputs) < 4 else tuple(inputs[3]._shape)
    for d, ms in _batch_splits(*inputs[:3], mask):
        yield Sig((S(d),) * 3 + ((ms,) if mask is not None else ()), (S(d), S(d)))


_EXP_SAFE = 64.0


def _in_exp_range(s: np.ndarray) -> bool:
    """Whether every score lies within +-_EXP_SAFE (false with NaN): two fast whole-array
    reductions instead of a row maximum."""
    return s.size > 0 and bool(s.min() > -_EXP_SAFE) and bool(s.max() < _EXP_SAFE)


def _masked_softmax_(s: np.ndarray, mask, is_causal: bool) -> None:
    """Mask the scaled scores ``s`` (..., L, S) and take the softmax over keys, in place."""
    L, S = s.shape[-2:]
    if mask is None and _in_exp_range(s):
        # softmax is shift-invariant, and exp of scores within +-64 neither overflows nor
        # underflows: the shift by the row maximum (a slow reduction over short rows) is skipped
        if is_causal:
            s += _causal_bias(L, S, s.dtype)  # every row keeps key 0, so no row sums to zero
        np.exp(s, out=s)
        total = s @ ones_vector(S, s.dtype)
        s *= np.reciprocal(total, out=total)[..., None]
        return
    if is_causal:
        s += _causal_bias(L, S, s.dtype)
    elif mask is not None:
        if mask.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~mask)
        else:
            np.add(s, mask, out=s, casting="unsafe")
    mx = s.max(axis=-1, keepdims=True)
    if mask is not None:  # a row of only -inf is shifted by 0 so it gives exp() = 0, not NaN
        np.copyto(mx, 0, where=np.isneginf(mx))
    s -= mx
    np.exp(s, out=s)
    total = s @ ones_vector(S, s.dtype)  # row sums as a matrix-vector product (fast, short rows)
    if mask is not None:
        total[total == 0] = 1
    s *= np.reciprocal(total, out=total)[..., None]


def _chunks(arrays, probs: np.ndarray, mask) -> list | None:
    """Ranges of the first batch axis to run in parallel, or None when the arrays don't share
    their batch dims (broadcasting) or the mask has batch dims of its own."""
    lead = probs.shape[:-2]
    if not lead or any(a.shape[:-2] != lead for a in arrays) or \
            (mask is not None and mask.ndim > 2):
        return None
    per_row = probs[0].size  # elements of the (L, S) arrays per index of the first axis
    return split(lead[0], -(-(1 << 16) // max(per_row, 1)))


def _forward(q, k, v, s, out, mask, attrs) -> None:
    # the scale goes on q (the smaller operand); the product lands straight in s
    np.matmul(q * s.dtype.type(attrs["scale"]), np.swapaxes(k, -1, -2), out=s)
    _masked_softmax_(s, mask, attrs["is_causal"])
    np.matmul(s, v, out=out)


@sdpa.kernel("cpu")
def _(ins, outs, attrs):
    out, probs = outs
    ct = _compute_dtype(probs.dtype)
    q, k, v = (_as(a, ct) for a in ins[:3])
    mask = ins[3] if len(ins) == 4 else None
    if probs.size == 0:  # no keys (or nothing at all): zero outputs
        out[...] = 0
        return
    ranges = _chunks((q, k, v, out), probs, mask) \
        if probs.dtype == ct and out.dtype == ct else None
    if ranges is not None:  # slices of the batch, on the intra-op threads
        def run(c: int) -> None:
            i, j = ranges[c]
            _forward(q[i:j], k[i:j], v[i:j], probs[i:j], out[i:j], mask, attrs)
        parallel_for(len(ranges), run)
        return
    s = probs if probs.dtype == ct else np.empty(probs.shape, ct)
    o = out if out.dtype == ct else np.empty(out.shape, ct)
    _forward(q, k, v, s, o, mask, attrs)
    _store(out, o)
    _store(probs, s)


@sdpa.grad
def _(ctx, dout, dprobs=None):
    need = ctx.needs_input_grad
    if dout is None and dprobs is None:
        return (None,) * len(need)
    q, k, v = ctx.inputs[:3]
    mask = ctx.inputs[3] if len(ctx.inputs) == 4 else None
    out, probs = ctx.outputs
    grads = F.scaled_dot_product_attention_grad(
        dout, q, k, v, probs, out, ctx.attrs["scale"], mask=mask, dprobs=dprobs,
        needs_input_grad=need)
    return tuple(g if n else None for g, n in zip(grads, need))


# ---- gradient ---------------------------------------------------------------------------------

sdpa_grad = register(_GRAD, amp="deny",
                     doc="Gradient of scaled_dot_product_attention from its saved "
                         "probabilities and output: inputs dout, q, k, v, probs, out "
                         "[, dprobs]; outputs dq, dk, dv [, dmask].")


@sdpa_grad.infer
def _(inputs, attrs):
    n = 7 if attrs["has_dprobs"] else 6
    if len(inputs) != n:
        fail(_GRAD, f"expected {n} inputs (dout, q, k, v, probs, out"
             f"{', dprobs' if n == 7 else ''}), got {len(inputs)}")
    dout, q, k, v, probs, out = inputs[:6]
    ps, ds, os_ = tuple(probs._shape), tuple(dout._shape), tuple(out._shape)
    qs, ks, vs = tuple(q._shape), tuple(k._shape), tuple(v._shape)
    if ds != os_ or len(os_) < 2 or os_[-2:] != (qs[-2], vs[-1]) or len(ps) < 2 \
            or ps[-2:] != (qs[-2], ks[-2]):
        fail(_GRAD, "dout / out / probs don't fit q, k, v", ds, os_, ps, qs, ks, vs)
    if n == 7 and tuple(inputs[6]._shape) != ps:
        fail(_GRAD, "dprobs must have the shape of probs", inputs[6]._shape, ps)
    metas = [Meta(qs, q.dtype), Meta(ks, k.dtype), Meta(vs, v.dtype)]
    if attrs.get("mask_shape") is not None:
        metas.append(Meta(tuple(attrs["mask_shape"]), probs.dtype))
    return metas


def _matmul_into(a: np.ndarray, b: np.ndarray, target: np.ndarray) -> None:
    """``target = sum_to(a @ b)``; straight into ``target`` when nothing is summed or cast."""
    if target.dtype == a.dtype and np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) \
            == target.shape[:-2]:
        np.matmul(a, b, out=target)
    else:
        _store(target, _sum_to(np.matmul(a, b), target.shape))


def _backward_direct(dout, q, k, v, p, out, dq, dk, dv, scale) -> None:
    """The gradient when nothing broadcasts or casts (one slice of the batch)."""
    np.matmul(np.swapaxes(p, -1, -2), dout, out=dv)
    ds = np.matmul(dout, np.swapaxes(v, -1, -2))
    ds -= np.einsum("...ij,...ij->...i", dout, out)[..., None]
    ds *= p
    np.matmul(ds, k * scale, out=dq)
    np.matmul(np.swapaxes(ds, -1, -2), q * scale, out=dk)


@sdpa_grad.sbp
def _(inputs, attrs):
    """Every input split on a batch dim q, k and v share: dq, dk, dv split there; the mask's
    gradient split where the mask is, else a partial sum (each rank sums its part of the
    batch)."""
    q, probs = inputs[1], inputs[4]
    if _batch(probs._shape) != _batch(q._shape):
        return
    mshape = attrs.get("mask_shape")
    for d, ms in _batch_splits(*inputs[1:4], mshape):
        outs = (S(d),) * 3
        local = None
        if mshape is not None:
            outs += (P if ms == B else ms,)
            if ms != B:
                local = _local_mask_shape(ms[1])
        yield Sig((S(d),) * len(inputs), outs, local=local)


def _local_mask_shape(dm: int):
    def local(attrs, index, n):
        shape = list(attrs["mask_shape"])
        start, stop = shard_range(shape[dm], n, index)
        shape[dm] = stop - start
        return dict(attrs, mask_shape=tuple(shape))
    return local


@sdpa_grad.kernel("cpu")
def _(ins, outs, attrs):
    ct = _compute_dtype(ins[4].dtype)
    dout, q, k, v, p, out = (_as(a, ct) for a in ins[:6])
    need = attrs["needs"]
    scale = ct.type(attrs["scale"])
    if len(ins) == 6 and len(outs) == 3 and all(need) and ins[5].dtype == ct and \
            all(o.dtype == ct for o in outs) and p.size:
        ranges = _chunks((dout, q, k, v, out) + tuple(outs), p, None)
        if ranges is not None:  # slices of the batch, on the intra-op threads
            def run(c: int) -> None:
                i, j = ranges[c]
                _backward_direct(dout[i:j], q[i:j], k[i:j], v[i:j], p[i:j], out[i:j],
                                 outs[0][i:j], outs[1][i:j], outs[2][i:j], scale)
            parallel_for(len(ranges), run)
            return
    for o, n in zip(outs[:3], need):
        if not n:  # not wanted by the caller: defined values all the same
            o[...] = 0
    if need[2]:  # dV = P^T dO
        _matmul_into(np.swapaxes(p, -1, -2), dout, outs[2])
    if not (need[0] or need[1] or len(outs) == 4):
        return
    # dS = P * (dP - rowsum(dP * P)) with dP = dO V^T (+ a gradient arriving at P itself);
    # rowsum(dO V^T * P) = rowsum(dO * O) comes from the narrow (L, Ev) arrays
    ds = _sum_to(np.matmul(dout, np.swapaxes(v, -1, -2)), p.shape)
    if len(ins) == 7 or ins[5].dtype != ct:  # (a half-precision O would lose digits)
        if len(ins) == 7:
            np.add(ds, ins[6], out=ds, casting="unsafe")
        rowdot = np.einsum("...ij,...ij->...i", ds, p)
    else:
        rowdot = _sum_to(np.einsum("...ij,...ij->...i", dout, out), p.shape[:-1])
    ds -= rowdot[..., None]
    ds *= p
    if need[0]:  # dQ = scale * dS K
        _matmul_into(ds, k * scale, outs[0])
    if need[1]:  # dK = scale * dS^T Q
        _matmul_into(np.swapaxes(ds, -1, -2), q * scale, outs[1])
    if len(outs) == 4:
        _store(outs[3], _sum_to(ds, outs[3].shape))


@sdpa_grad.grad
def _(ctx, *douts):
    raise NotImplementedError(
        f"{_GRAD}: the fused gradient op has no gradient of its own; "
        f"F.scaled_dot_product_attention_grad builds a differentiable gradient with "
        f"functional ops when grad mode is on")
