"""Pointwise loss ops: mse, l1, smooth_l1, huber, kl_div, binary_cross_entropy(_with_logits).

Each loss is one forward op (elementwise loss, optional elementwise ``weight`` and the reduction
in one kernel) and one ``<name>_backward`` op computing every gradient that is needed (input,
target, weight, pos_weight) in one kernel. A loss is described by two NumPy functions:
``value(x, t, pos_weight, attrs)`` gives the elementwise loss and
``deriv(x, t, pos_weight, attrs, need_t)`` the elementwise derivatives
``(d/dx, d/dt, d/dpos_weight)``, where a ``d/dt`` of None means ``-d/dx``.

Inputs: ``(input, target[, weight][, pos_weight])`` as flagged by the attrs ``has_weight`` and
``has_pos_weight``. With the attr ``weight_norm`` (mse, l1) 'mean' divides by the sum of the
weights instead of the element count; 'batchmean' (kl_div) divides the sum by the batch size.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, autograd, promote
from actorflow.ops.boxing import B, P, S, Sig
from actorflow.ops.loss import (
    REDUCTIONS, backward_infer, check_reduction, grad_rule, no_double_backward, work,
)
from actorflow.ops.registry import Meta, fail, register


def _unpack(ins, attrs):
    x, t, rest = ins[0], ins[1], list(ins[2:])
    w = rest.pop(0) if attrs.get("has_weight") else None
    p = rest.pop(0) if attrs.get("has_pos_weight") else None
    return x, t, w, p


def _sum_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum a broadcast result back to ``shape``."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and a.shape[lead + i] != 1)
    return (np.sum(a, axis=axes) if axes else a).reshape(shape)


def _denominator(x: np.ndarray, w, attrs) -> float:
    """What 'mean' / 'batchmean' divide the summed loss by."""
    if attrs["reduction"] == "batchmean":
        return float(x.shape[0]) if x.ndim else 1.0
    if w is not None and attrs.get("weight_norm"):
        return float(np.sum(np.broadcast_to(work(w), x.shape)))
    return float(x.size)


def _infer(name: str, reductions: tuple, check):
    def infer(inputs, attrs):
        x, t, w, p = _unpack(inputs, attrs)
        check_reduction(name, attrs["reduction"], reductions)
        xs, ts = tuple(x._shape), tuple(t._shape)
        if not x.dtype.is_floating_point:
            fail(name, f"expected a floating point input, got {x.dtype}", xs)
        if ts != xs:
            fail(name, f"target shape {ts} must match input shape {xs}", xs, ts)
        for label, e in (("weight", w), ("pos_weight", p)):
            if e is None:
                continue
            es = tuple(e._shape)
            if not e.dtype.is_floating_point:
                fail(name, f"{label} must be a floating point tensor, got {e.dtype}")
            if len(es) > len(xs) or any(n not in (1, m) for n, m in zip(es[::-1], xs[::-1])):
                fail(name, f"{label} of shape {es} must broadcast to the input shape {xs}",
                     xs, es)
        if check is not None:
            check(name, attrs)
        return [Meta(xs if attrs["reduction"] == "none" else (), promote([x, t]))]
    return infer


def _split_with(t, d: int, nd: int):
    """The sbp of a weight (or pos_weight) ``t`` when the input is split on dim ``d`` of
    ``nd``: split where it has that dim, broadcast where it broadcasts along it."""
    k = d - (nd - len(t._shape))
    return B if k < 0 or t._shape[k] == 1 else S(k)


def _mean_share(attrs: dict, shape: tuple, d: int):
    """``(local, post)`` of a signature whose loss is split on dim ``d``: each rank sums its
    elements, then divides by the logical denominator - the element count ('mean') or the
    batch size ('batchmean') - never by its own. None for a mean that needs every rank's
    weights ('mean' normalised by the weights' sum) or a zero denominator."""
    red = attrs["reduction"]
    if red in ("none", "sum"):
        return None, None
    if red == "mean" and attrs.get("has_weight") and attrs.get("weight_norm"):
        return False
    den = shape[0] if red == "batchmean" else int(np.prod(shape))
    if not den:
        return False
    return (lambda a, index, n: dict(a, reduction="sum"),
            lambda outs, a, index, n: [F.mul(o, 1.0 / den) for o in outs])


def _loss_sbp(inputs, attrs):
    """Input and target split alike on any dim (a weight / pos_weight split with them where
    it has the dim, else broadcast): per-element losses stay split; a summed loss is partial,
    and so is a mean, each rank's sum over the logical denominator (see ``_mean_share``)."""
    shape = tuple(inputs[0]._shape)
    for d in range(len(shape)):
        share = _mean_share(attrs, shape, d)
        if share is False:
            return
        ins = (S(d), S(d)) + tuple(_split_with(e, d, len(shape)) for e in inputs[2:])
        out = S(d) if attrs["reduction"] == "none" else P
        yield Sig(ins, (out,), share[1], share[0])


def _loss_backward_sbp(inputs, attrs):
    """``<loss>_backward`` split as its forward: dout split with the elements ('none') or
    broadcast (a reduced loss); input and target gradients split; a weight's (pos_weight's)
    gradient split with it, or partial where it was broadcast (summed over the local
    elements); a mean's gradients divided by the logical denominator."""
    shape = tuple(inputs[1]._shape)
    for d in range(len(shape)):
        share = _mean_share(attrs, shape, d)
        if share is False:
            return
        ins = [S(d), S(d)] + [_split_with(e, d, len(shape)) for e in inputs[3:]]
        outs = tuple(s if s != B else P for s, n in zip(ins, attrs["needs"]) if n)
        dout = S(d) if attrs["reduction"] == "none" else B
        yield Sig((dout, *ins), outs, share[1], share[0])


def _f(fn, pos_weight: bool = False):
    """Mark a ``deriv_f`` (whether it handles a pos_weight)."""
    fn.pos_weight = pos_weight
    return fn


def _double_backward(name: str, deriv_f):
    """The gradient rule of ``<name>_backward``: the vector-Jacobian product of the first
    derivatives written as functional ops (``deriv_f(x, t, attrs, pos_weight) -> (d/dx, d/dt
    or None)``), for the input and target gradients (weight and pos_weight count as constants;
    a gradient *of* them is not differentiated again)."""
    def rule(ctx, *ggs):
        attrs = ctx.attrs
        x, t, w, p = _unpack(ctx.inputs[1:], attrs)
        names = [k for k, a in zip("xtwp", (x, t, w, p)) if a is not None]
        produced = [k for k, n in zip(names, attrs["needs"]) if n]
        if "w" in produced or "p" in produced or (p is not None and not deriv_f.pos_weight):
            return no_double_backward(name)(ctx, *ggs)
        keep = autograd.is_grad_enabled()  # create_graph: the result stays differentiable
        srcs = [ctx.inputs[0], x, t]
        if not keep:
            srcs = [a.detach().requires_grad_() for a in srcs]
        dout, xs, ts = srcs
        with autograd.enable_grad():  # the rule differentiates a composite
            g = dout
            red = attrs["reduction"]
            if red == "mean":
                den = (F.broadcast_to(w, tuple(xs._shape)).sum() if w is not None
                       and attrs.get("weight_norm") else float(max(xs.numel(), 1)))
                g = g / den
            elif red == "batchmean":
                g = g / float(xs._shape[0] if len(xs._shape) else 1)
            if w is not None:
                g = g * w.detach()
            dx_e, dt_e = deriv_f(xs, ts, attrs, None if p is None else p.detach())
            outs = {"x": dx_e * g, "t": (-dx_e if dt_e is None else dt_e) * g}
            pairs = [(outs[k], gg) for k, gg in zip(produced, ggs) if gg is not None]
            if not pairs:
                return (None,) * len(ctx.inputs)
            wrt = [a for a in srcs if a.requires_grad]
            res = iter(autograd.grad([o for o, _ in pairs], wrt, [gg for _, gg in pairs],
                            create_graph=keep, allow_unused=True))
        out = [next(res) if a.requires_grad else None for a in srcs]
        return tuple(out) + (None,) * (len(ctx.inputs) - 3)
    return rule


def pointwise_loss(name: str, value, deriv, *, reductions: tuple = REDUCTIONS, check=None,
                   doc: str = "", deriv_f=None):
    """Register loss op ``name`` and ``<name>_backward`` from ``value`` and ``deriv`` (both
    run in float32 under AMP); ``deriv_f``, the first derivatives as functional ops, gives
    the backward op a gradient rule (double backward)."""
    op = register(name, amp="deny", doc=doc)
    op.infer(_infer(name, reductions, check))

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x, t, w, p = _unpack(ins, attrs)
        loss = value(work(x), work(t), None if p is None else work(p), attrs)
        if w is not None:
            loss = loss * work(w)
        red, out = attrs["reduction"], outs[0]
        if red == "none":
            out[...] = loss
        elif red == "sum":
            out[...] = np.sum(loss)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                out[...] = np.sum(loss) / _denominator(x, w, attrs)

    op.grad(grad_rule(name))
    op.sbp(_loss_sbp)
    bwd = register(name + "_backward", amp="deny",
                   doc=f"Gradients of {name}: inputs (dout, input, target[, weight]"
                       f"[, pos_weight]).")
    bwd.infer(backward_infer)
    bwd.sbp(_loss_backward_sbp)
    bwd.grad(no_double_backward(name) if deriv_f is None else _double_backward(name, deriv_f))

    @bwd.kernel("cpu")
    def _(ins, outs, attrs):
        x, t, w, p = _unpack(ins[1:], attrs)
        names = [k for k, a in zip("xtwp", (x, t, w, p)) if a is not None]
        given = iter(outs)
        wanted = {k: next(given) for k, n in zip(names, attrs["needs"]) if n}
        dx, dt, dw, dp = (wanted.get(k) for k in "xtwp")
        xs, ts, ps = work(x), work(t), None if p is None else work(p)
        red = attrs["reduction"]
        g = work(ins[0])
        if red != "none":
            g = g.item()
            if red != "sum":
                den = _denominator(x, w, attrs)
                g = g / den if den else g * np.nan
        gw = g if w is None else g * work(w)
        if dx is not None or dt is not None or dp is not None:
            ddx, ddt, ddp = deriv(xs, ts, ps, attrs, dt is not None)
            if dx is not None:
                np.multiply(ddx, gw, out=dx, casting="unsafe")
            if dt is not None:
                np.multiply(ddx if ddt is None else ddt, -gw if ddt is None else gw, out=dt,
                            casting="unsafe")
            if dp is not None:
                dp[...] = _sum_to(np.broadcast_to(ddp * gw, x.shape), p.shape)
        if dw is not None:
            loss = value(xs, ts, ps, attrs)
            if red == "mean" and attrs.get("weight_norm"):
                wf = np.broadcast_to(work(w), x.shape)
                loss = loss - np.sum(loss * wf) / np.sum(wf)
            dw[...] = _sum_to(np.broadcast_to(loss * g, x.shape), w.shape)

    return op


# ---- the losses -------------------------------------------------------------------------------

def _mse(x, t, p, attrs):
    return np.square(x - t)


def _mse_d(x, t, p, attrs, need_t):
    return 2.0 * (x - t), None, None


mse_loss = pointwise_loss("mse_loss", _mse, _mse_d, doc="Squared error (x - t)^2.",
                          deriv_f=_f(lambda x, t, a, p: ((x - t) * 2.0, None)))


def _l1(x, t, p, attrs):
    return np.abs(x - t)


def _l1_d(x, t, p, attrs, need_t):
    return np.sign(x - t), None, None


l1_loss = pointwise_loss("l1_loss", _l1, _l1_d, doc="Absolute error |x - t|.",
                         deriv_f=_f(lambda x, t, a, p: (F.sign(x - t), None)))


def _smooth_l1(x, t, p, attrs):
    beta, d = attrs["beta"], np.abs(x - t)
    if beta == 0:
        return d
    return np.where(d < beta, (0.5 / beta) * d * d, d - 0.5 * beta)


def _smooth_l1_d(x, t, p, attrs, need_t):
    beta, d = attrs["beta"], x - t
    return (np.sign(d) if beta == 0 else np.clip(d / beta, -1.0, 1.0)), None, None


def _check_beta(name, attrs):
    if attrs["beta"] < 0:
        fail(name, f"beta must be non-negative, got {attrs['beta']}")


def _smooth_l1_f(x, t, attrs, p):
    beta = attrs["beta"]
    return (F.sign(x - t) if beta == 0 else F.clamp((x - t) / beta, -1.0, 1.0)), None


smooth_l1_loss = pointwise_loss(
    "smooth_l1_loss", _smooth_l1, _smooth_l1_d, check=_check_beta, deriv_f=_f(_smooth_l1_f),
    doc="0.5 (x - t)^2 / beta where |x - t| < beta, else |x - t| - 0.5 beta.")


def _huber(x, t, p, attrs):
    delta, d = attrs["delta"], np.abs(x - t)
    return np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))


def _huber_d(x, t, p, attrs, need_t):
    return np.clip(x - t, -attrs["delta"], attrs["delta"]), None, None


def _check_delta(name, attrs):
    if attrs["delta"] <= 0:
        fail(name, f"delta must be positive, got {attrs['delta']}")


huber_loss = pointwise_loss(
    "huber_loss", _huber, _huber_d, check=_check_delta,
    deriv_f=_f(lambda x, t, a, p: (F.clamp(x - t, -a["delta"], a["delta"]), None)),
    doc="0.5 (x - t)^2 where |x - t| < delta, else delta (|x - t| - 0.5 delta).")


def _kl(x, t, p, attrs):
    if attrs["log_target"]:
        return np.exp(t) * (t - x)
    pos = t > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        v = t * (np.log(np.where(pos, t, 1.0)) - x)
    # t log t is 0 at t == 0 and undefined below
    return np.where(pos, v, np.where(t == 0, 0.0, np.nan))


def _kl_d(x, t, p, attrs, need_t):
    if attrs["log_target"]:
        e = np.exp(t)
        return -e, (e * (t - x + 1.0) if need_t else None), None
    if not need_t:
        return -t, None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        return -t, np.log(t) + 1.0 - x, None


def _kl_f(x, t, attrs, p):
    if attrs["log_target"]:
        e = F.exp(t)
        return -e, e * (t - x + 1.0)
    return -t, F.log(t) + 1.0 - x


kl_div = pointwise_loss(
    "kl_div", _kl, _kl_d, reductions=REDUCTIONS + ("batchmean",), deriv_f=_f(_kl_f),
    doc="Kullback-Leibler divergence t (log t - x) of log-probabilities x from target t.")


def _bce(x, t, p, attrs):
    if np.any((x < 0) | (x > 1)):
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):
        log_x, log_1mx = np.log(x), np.log1p(-x)
    return -(t * np.maximum(log_x, -100.0) + (1.0 - t) * np.maximum(log_1mx, -100.0))


def _bce_d(x, t, p, attrs, need_t):
    dx = (x - t) / np.maximum(x * (1.0 - x), 1e-12)
    if not need_t:
        return dx, None, None
    with np.errstate(divide="ignore"):
        dt = np.maximum(np.log1p(-x), -100.0) - np.maximum(np.log(x), -100.0)
    return dx, dt, None


binary_cross_entropy = pointwise_loss(
    "binary_cross_entropy", _bce, _bce_d,
    doc="-(t log x + (1 - t) log(1 - x)) with the logs clamped at -100.")


def _softplus_neg(x):
    """``(log(1 + exp(-x)), exp(-|x|))`` computed without overflow."""
    e = np.exp(-np.abs(x))
    return np.log1p(e) + np.maximum(-x, 0.0), e


def _bce_logits(x, t, p, attrs):
    sp, _ = _softplus_neg(x)
    return (1.0 - t) * x + (sp if p is None else (1.0 + (p - 1.0) * t) * sp)


def _bce_logits_d(x, t, p, attrs, need_t):
    sp, e = _softplus_neg(x)
    sig_neg = np.where(x >= 0, e, 1.0) / (1.0 + e)  # sigmoid(-x)
    if p is None:
        return (1.0 - t) - sig_neg, (-x if need_t else None), None
    dx = (1.0 - t) - (1.0 + (p - 1.0) * t) * sig_neg
    dt = (p - 1.0) * sp - x if need_t else None
    return dx, dt, t * sp


def _bce_logits_f(x, t, attrs, p):
    if p is None:
        return F.sigmoid(x) - t, -x
    sp = F.softplus(-x)  # log(1 + exp(-x))
    return (1.0 - t) - (1.0 + (p - 1.0) * t) * F.sigmoid(-x), (p - 1.0) * sp - x


binary_cross_entropy_with_logits = pointwise_loss(
    "binary_cross_entropy_with_logits", _bce_logits, _bce_logits_d,
    deriv_f=_f(_bce_logits_f, pos_weight=True),
    doc="Sigmoid + binary cross entropy in one stable op; pos_weight scales positive terms.")
