"""Scans along one dim beyond cumsum / cumprod (those are in ``ops/reduce.py``):
``logcumsumexp`` and the running extrema ``cummax`` / ``cummin`` (values and indices).

``logcumsumexp`` accumulates with ``logaddexp`` (no overflow); its gradient,
``dx_k = sum_{i >= k} g_i exp(x_k - out_i)``, is computed as PyTorch does, as reversed
logcumsumexps of the positive and negative parts of ``g``, so it stays finite where
``exp(-out)`` alone would overflow. The running extrema take the latest index among equal
values and propagate NaN (its index too), as PyTorch; their gradient scatters ``g`` onto the
indices. Each is computed along ``dim`` alone: a split along another dim stays split.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, HALF_DTYPES, norm_axis
from actorflow.ops.boxing import S, Sig
from actorflow.ops.elementwise import no_complex
from actorflow.ops.registry import Meta, register


def _scan_rule(n_out: int):
    """SBP: split along any dim but the scanned one."""
    def rule(inputs, attrs):
        nd = len(inputs[0]._shape)
        dim = attrs["dim"] % max(nd, 1)
        for d in range(nd):
            if d != dim:
                yield Sig((S(d),), (S(d),) * n_out)
    return rule


# ---- logcumsumexp -------------------------------------------------------------------------------

logcumsumexp = register("logcumsumexp", grad_uses_outputs=True, amp="deny",
                        doc="log(cumsum(exp(x))) along ``dim``, computed without overflow.")
logcumsumexp.sbp(_scan_rule(1))


@logcumsumexp.infer
def _(inputs, attrs):
    x = inputs[0]
    norm_axis("logcumsumexp", attrs["dim"], len(x._shape))
    no_complex("logcumsumexp", x.dtype, x._shape)
    d = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    return [Meta(x._shape, d)]


@logcumsumexp.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    work = np.float32 if out.dtype in HALF_DTYPES else out.dtype
    x = np.asarray(x, work)
    if x.ndim == 0:
        np.copyto(out, x, casting="unsafe")
        return
    axis = norm_axis("logcumsumexp", attrs["dim"], x.ndim)
    with np.errstate(invalid="ignore"):
        r = np.logaddexp.accumulate(x, axis=axis) if x.size else x
    np.copyto(out, r, casting="unsafe")


def _reverse_lcse(t, d: int):
    return F.flip(F.logcumsumexp(F.flip(t, (d,)), d), (d,))


def _lowest(d) -> float:
    """The most negative finite value of the dtype ``d`` (stands for log 0 in the gradient,
    where -inf would make its own gradient NaN)."""
    try:
        return float(np.finfo(d.np).min)
    except (TypeError, ValueError):  # bfloat16 without NumPy's finfo
        return -3.0e38


@logcumsumexp.grad
def _(ctx, g):
    x, out = ctx.inputs[0], ctx.outputs[0]
    if not g._shape:
        return g
    d = norm_axis("logcumsumexp", ctx.attrs["dim"], len(g._shape))
    g = F.cast(g, out.dtype)
    log_abs = F.log(F.abs(g))
    low = _lowest(out.dtype)
    pos = F.where(F.gt(g, 0), log_abs, low)
    neg = F.where(F.lt(g, 0), log_abs, low)
    up = F.exp(F.add(_reverse_lcse(F.sub(pos, out), d), x))
    down = F.exp(F.add(_reverse_lcse(F.sub(neg, out), d), x))
    return F.sub(up, down)


# ---- cummax / cummin ----------------------------------------------------------------------------

def _running(name: str, better):
    op = register(name, grad_uses_outputs=(1,),
                  doc=f"Running {name[3:]}imum along ``dim``: values (the input's dtype) and "
                      f"indices (int64) of where each was found (the latest of equal values; "
                      f"NaN propagates).")
    op.sbp(_scan_rule(2))

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        norm_axis(name, attrs["dim"], len(x._shape))
        no_complex(name, x.dtype, x._shape)
        return [Meta(x._shape, x.dtype), Meta(x._shape, dt.int64)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x, vals, idx = ins[0], outs[0], outs[1]
        if x.ndim == 0:
            vals[...] = x
            idx[...] = 0
            return
        if x.size == 0:
            return
        axis = norm_axis(name, attrs["dim"], x.ndim)
        xm, vm, im = (np.moveaxis(a, axis, 0) for a in (x, vals, idx))
        floating = x.dtype.kind in "fc" or x.dtype in HALF_DTYPES
        cur = np.array(xm[0])
        at = np.zeros(cur.shape, np.int64)
        vm[0], im[0] = cur, at
        for k in range(1, xm.shape[0]):
            v = xm[k]
            with np.errstate(invalid="ignore"):
                take = better(v, cur)
            if floating:
                take = np.isnan(v) | (~np.isnan(cur) & take)
            cur = np.where(take, v, cur)
            at = np.where(take, k, at)
            vm[k], im[k] = cur, at

    @op.grad
    def _(ctx, g, gi):
        if g is None:
            return None
        if not g._shape:
            return g
        idx = ctx.outputs[1]  # zeros_like(g): the input's shape and dtype, and its placement
        return F.scatter_add(F.zeros_like(g), ctx.attrs["dim"], idx, g)

    return op


cummax = _running("cummax", np.greater_equal)
cummin = _running("cummin", np.less_equal)
