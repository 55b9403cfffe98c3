"""Connectionist temporal classification loss (PyTorch's ``ctc_loss``): ``ctc_loss`` gives each
sequence's negative log-likelihood by the forward (alpha) recursion in log space, and keeps
the alphas as an extra output; ``ctc_loss_grad`` runs the backward (beta) recursion.

Layout: log_probs (T, N, C); targets (N, S) padded or 1-d concatenated; input_lengths and
target_lengths (N,) integers; attrs blank, zero_infinity. The gradient is PyTorch's:
``exp(log_probs) - exp(log(sum_s alpha*beta for label c) + nll - log_probs)`` per (t, n, c)
with t < input_length, zero beyond. It is the derivative with respect to the logits of a
``log_softmax`` that produced ``log_probs`` (PyTorch assumes that input); through such a
``log_softmax`` it equals the true gradient.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.registry import Meta, fail, register

_NEG_INF = -np.inf


def _check(name: str, inputs):
    lp, targets, in_len, tgt_len = inputs[:4]
    if len(lp._shape) != 3 or not lp.dtype.is_floating_point:
        fail(name, "log_probs must be floating point of shape (T, N, C)", lp._shape)
    t, n, c = lp._shape
    for what, x in (("input_lengths", in_len), ("target_lengths", tgt_len)):
        if tuple(x._shape) != (n,) or x.dtype._category != 1:
            fail(name, f"{what} must be integers of shape (N,) = ({n},)", x._shape)
    if targets.dtype._category != 1 or len(targets._shape) not in (1, 2) or (
            len(targets._shape) == 2 and targets._shape[0] != n):
        fail(name, "targets must be integers, (N, S) padded or 1-d concatenated",
             lp._shape, targets._shape)
    return t, n, c


def _sequences(targets, tgt_len, n):
    """Each batch entry's target labels; the lengths must fit the targets, as in PyTorch (never
    clipped to what is there)."""
    if np.any(tgt_len < 0):
        raise ValueError(f"ctc_loss: target_lengths must be >= 0, got {tgt_len.tolist()}")
    if targets.ndim == 2 and n and tgt_len.max() > targets.shape[1]:
        raise ValueError(f"ctc_loss: target_lengths {tgt_len.tolist()} exceed the padded "
                         f"targets' length {targets.shape[1]} (targets of shape "
                         f"{targets.shape})")
    if targets.ndim == 1 and int(tgt_len.sum()) != targets.shape[0]:
        raise ValueError(f"ctc_loss: concatenated targets hold {targets.shape[0]} labels but "
                         f"target_lengths {tgt_len.tolist()} sum to {int(tgt_len.sum())}")
    if targets.ndim == 2:
        return [targets[b, :tgt_len[b]] for b in range(n)]
    ends = np.cumsum(tgt_len)
    return [targets[e - k:e] for e, k in zip(ends, tgt_len)]


def _extended(labels, blank):
    ext = np.full(2 * len(labels) + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    # s may also come from s - 2 when it is a label different from the one two back
    skip = np.zeros(len(ext), dtype=bool)
    if len(ext) > 2:
        skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    return ext, skip


def _check_values(name, lp, in_len, labels, blank):
    t_max, _, c = lp.shape
    if not 0 <= blank < c:
        raise ValueError(f"{name}: blank {blank} is out of range for {c} classes")
    if np.any(in_len < 0) or np.any(in_len > t_max):
        raise ValueError(f"{name}: input_lengths must be in [0, {t_max}], got {in_len.tolist()}")
    for seq in labels:
        if len(seq) and (seq.min() < 0 or seq.max() >= c):
            raise ValueError(f"{name}: target labels must be in [0, {c}), got {seq.tolist()}")


def _lse3(a, b, c):
    m = np.maximum(np.maximum(a, b), c)
    finite = np.isfinite(m)
    safe = np.where(finite, m, 0.0)
    with np.errstate(divide="ignore"):
        out = safe + np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe))
    return np.where(finite, out, m)


def _alpha(lp_b, ext, skip, length):
    """log alpha (length, L) of one sequence; lp_b is (T, C)."""
    L = len(ext)
    alpha = np.full((max(length, 1), L), _NEG_INF)
    if length == 0:
        return alpha
    alpha[0, 0] = lp_b[0, ext[0]]
    if L > 1:
        alpha[0, 1] = lp_b[0, ext[1]]
    neg = np.full(2, _NEG_INF)
    for t in range(1, length):
        prev = alpha[t - 1]
        one = np.concatenate([neg[:1], prev])[:-1]
        two = np.where(skip, np.concatenate([neg, prev])[:-2], _NEG_INF)
        alpha[t] = _lse3(prev, one, two) + lp_b[t, ext]
    return alpha


def _nll(alpha, length, L):
    if length == 0:
        return 0.0 if L == 1 else np.inf
    last = alpha[length - 1]
    tail = np.logaddexp(last[-1], last[-2]) if L > 1 else last[-1]
    return -tail


ctc_loss = register(
    "ctc_loss", amp="deny", grad_uses_outputs=True,
    doc="CTC negative log-likelihood per sequence (inputs log_probs (T, N, C), targets, "
        "input_lengths, target_lengths; attrs blank, zero_infinity); outputs nll (N,) and "
        "log_alpha (N, T, 2 * S_max + 1) for the gradient.")


@ctc_loss.infer
def _(inputs, attrs):
    t, n, _ = _check("ctc_loss", inputs)
    targets = inputs[1]
    s_max = targets._shape[1] if len(targets._shape) == 2 else targets._shape[0]
    lp = inputs[0]
    return [Meta((n,), lp.dtype), Meta((n, t, 2 * s_max + 1), lp.dtype)]


def _forward(ins, attrs):
    lp, targets, in_len, tgt_len = ins
    lp64 = lp.astype(np.float64)
    n = lp.shape[1]
    in_len, tgt_len = in_len.astype(np.int64), tgt_len.astype(np.int64)
    labels = _sequences(targets.astype(np.int64), tgt_len, n)
    _check_values("ctc_loss", lp, in_len, labels, attrs["blank"])
    return lp64, in_len, labels


@ctc_loss.kernel("cpu")
def _(ins, outs, attrs):
    lp64, in_len, labels = _forward(ins, attrs)
    nll, log_alpha = outs
    log_alpha[...] = _NEG_INF
    for b, seq in enumerate(labels):
        ext, skip = _extended(seq, attrs["blank"])
        length = int(in_len[b])
        alpha = _alpha(lp64[:, b], ext, skip, length)
        log_alpha[b, :length, :len(ext)] = alpha[:length]
        v = _nll(alpha, length, len(ext))
        nll[b] = 0.0 if (attrs["zero_infinity"] and np.isinf(v)) else v


@ctc_loss.grad
def _(ctx, dnll, _dalpha=None):
    if dnll is None:
        return None, None, None, None
    lp, targets, in_len, tgt_len = ctx.inputs
    nll, log_alpha = ctx.outputs
    return (F.ctc_loss_grad(dnll, lp, targets, in_len, tgt_len, nll, log_alpha,
                            ctx.attrs["blank"], ctx.attrs["zero_infinity"]), None, None, None)


ctc_loss_grad = register(
    "ctc_loss_grad", amp="deny",
    doc="Gradient of ctc_loss with respect to log_probs (inputs dnll, log_probs, targets, "
        "input_lengths, target_lengths, nll, log_alpha; attrs blank, zero_infinity).")


@ctc_loss_grad.infer
def _(inputs, attrs):
    lp = inputs[1]
    return [Meta(lp._shape, lp.dtype)]


@ctc_loss_grad.kernel("cpu")
def _(ins, outs, attrs):
    dnll, lp, targets, in_len, tgt_len, _nll_out, log_alpha = ins
    lp64, in_len, labels = _forward([lp, targets, in_len, tgt_len], attrs)
    grad = outs[0]
    grad[...] = 0
    c = lp.shape[2]
    for b, seq in enumerate(labels):
        length = int(in_len[b])
        ext, skip = _extended(seq, attrs["blank"])
        L = len(ext)
        if length == 0:
            continue
        v = _nll(log_alpha[b, :length, :L].astype(np.float64), length, L)
        if np.isinf(v) and attrs["zero_infinity"]:
            continue
        lpb = lp64[:length, b]
        beta = np.full((length, L), _NEG_INF)
        beta[-1, -1] = lpb[-1, ext[-1]]
        if L > 1:
            beta[-1, -2] = lpb[-1, ext[-2]]
        skip_next = np.zeros(L, dtype=bool)
        skip_next[:-2] = skip[2:]
        neg = np.full(2, _NEG_INF)
        for t in range(length - 2, -1, -1):
            nxt = beta[t + 1]
            one = np.concatenate([nxt, neg[:1]])[1:]
            two = np.where(skip_next, np.concatenate([nxt, neg])[2:], _NEG_INF)
            beta[t] = _lse3(nxt, one, two) + lpb[t, ext]
        ab = log_alpha[b, :length, :L].astype(np.float64) + beta
        lcab = np.full((length, c), _NEG_INF)
        for s in range(L):
            lcab[:, ext[s]] = np.logaddexp(lcab[:, ext[s]], ab[:, s])
        with np.errstate(invalid="ignore", over="ignore"):
            g = np.exp(lpb) - np.exp(lcab + v - lpb)
        grad[:length, b] = g * float(dnll[b])


@ctc_loss_grad.grad
def _(ctx, *douts):
    raise NotImplementedError("ctc_loss: double backward (a gradient of the gradient) is not "
                              "supported")
