"""Loss ops over class scores: ``cross_entropy`` (log-softmax fused in) and ``nll_loss``.

Each loss is one forward op that applies the reduction itself, and one ``<name>_backward`` op
that computes the input gradients in a single kernel; the gradient rule calls the backward op
through ``F.loss_backward``. ``cross_entropy`` saves the softmax probabilities as its second
output, so its backward needs no exponentials.

Layout: input ``(N, C, d1, ...)`` or ``(C,)``; class-index targets ``(N, d1, ...)`` or ``()``;
class-probability targets have the input's shape. ``weight`` holds one value per class.
Pointwise losses (mse, l1, kl_div, bce...) live in ``loss_pointwise``.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, is_floating, sum_keepdim
from actorflow.ops.boxing import B, P, S, Sig
from actorflow.ops.registry import Meta, fail, register

REDUCTIONS = ("none", "mean", "sum")


def check_reduction(name: str, reduction, allowed: tuple = REDUCTIONS) -> None:
    if reduction not in allowed:
        fail(name, "reduction must be one of " + ", ".join(repr(r) for r in allowed)
             + f", got {reduction!r}")


def work(a: np.ndarray) -> np.ndarray:
    """The array to compute with: half precision is computed in float32."""
    return a.astype(np.float32) if a.dtype.itemsize < 4 else a


def work_dtype(a: np.ndarray) -> np.dtype:
    return np.dtype(np.float32) if a.dtype.itemsize < 4 else a.dtype


def grad_rule(name: str, extra_outputs: bool = False):
    """The gradient rule of loss op ``name``: one ``<name>_backward`` call for every input that
    needs a gradient (``extra_outputs``: the op's saved outputs are passed after the inputs)."""
    def rule(ctx, dout, *unused):
        needs = ctx.needs_input_grad
        if dout is None or not any(needs):
            return (None,) * len(needs)
        inputs = [dout, *ctx.inputs] + (list(ctx.outputs[1:]) if extra_outputs else [])
        grads = iter(F.loss_backward(name, inputs, dict(ctx.attrs, needs=needs)))
        return tuple(next(grads) if n else None for n in needs)
    return rule


def backward_infer(inputs, attrs):
    """Metas of a ``<loss>_backward`` op: one gradient per forward input flagged in ``needs``
    (the forward inputs follow ``dout``)."""
    return [Meta(tuple(t._shape), t.dtype)
            for t, n in zip(inputs[1:], attrs["needs"]) if n]


def no_double_backward(name: str):
    def rule(ctx, *douts):
        raise RuntimeError(f"{name}: differentiating the gradient of {name} a second time "
                           f"(double backward) is not supported")
    return rule


# ---- class-index helpers ----------------------------------------------------------------------

def _class_infer(name: str, inputs, attrs, allow_probs: bool) -> tuple:
    """Check input, target and weight; return the loss's shape."""
    x, y = inputs[0], inputs[1]
    check_reduction(name, attrs["reduction"])
    xs, ys = tuple(x._shape), tuple(y._shape)
    if not x.dtype.is_floating_point:
        fail(name, f"expected a floating point input, got {x.dtype}")
    if not xs:
        fail(name, "input must have at least one dimension (the classes)", xs)
    n_cls = xs[1] if len(xs) >= 2 else xs[0]
    if n_cls == 0:
        fail(name, "input has no classes (dim 1 is empty)", xs)
    pos_shape = (xs[0],) + xs[2:] if len(xs) >= 2 else ()
    if y.dtype.is_floating_point:
        if not allow_probs:
            fail(name, f"target must hold integer class indices, got {y.dtype}", xs, ys)
        if ys != xs:
            fail(name, f"a class-probability target must have the input's shape {xs}, "
                 f"got {ys}", xs, ys)
        if attrs["ignore_index"] != -100:
            fail(name, "ignore_index is not supported for class-probability targets")
    else:
        if y.dtype._category != 1:
            fail(name, f"target must hold integer class indices (or, for cross_entropy, "
                 f"class probabilities), got {y.dtype}", xs, ys)
        if ys != pos_shape:
            fail(name, f"expected a target of shape {pos_shape} for an input of shape {xs}, "
                 f"got {ys}", xs, ys)
    if not 0.0 <= attrs.get("label_smoothing", 0.0) <= 1.0:
        fail(name, f"label_smoothing must be in [0, 1], got {attrs['label_smoothing']}")
    if len(inputs) > 2:
        w = inputs[2]
        if tuple(w._shape) != (n_cls,) or not w.dtype.is_floating_point:
            fail(name, f"weight must be a floating point tensor of shape ({n_cls},), one value "
                 f"per class; got {w.dtype} of shape {tuple(w._shape)}", xs, w._shape)
    return pos_shape if attrs["reduction"] == "none" else ()


def _batched(*arrays):
    """Give a ``(C,)`` input (and its scalar target, loss...) a batch axis of 1."""
    return [None if a is None else a.reshape((1,) + a.shape) for a in arrays]


def _class_targets(name: str, y: np.ndarray, n_cls: int, ignore_index: int):
    """(mask of counted positions or None when all count, targets safe to index with)."""
    if y.size:
        lo, hi = y.min(), y.max()
        if lo >= 0 and hi < n_cls and not lo <= ignore_index <= hi:
            return None, y
    keep = y != ignore_index
    bad = keep & ((y < 0) | (y >= n_cls))
    if bad.any():
        raise ValueError(f"{name}: target {int(y[bad].flat[0])} is out of bounds for "
                         f"{n_cls} classes")
    if keep.all():
        return None, y
    return keep, np.where(keep, y, 0)


def _target_weights(w, ys, mask, dtype):
    """Weight of each position's target class, 0 where ignored; None when every one is 1."""
    if w is None:
        return None if mask is None else mask.astype(dtype)
    wy = w.astype(dtype, copy=False)[ys]
    return wy if mask is None else wy * mask


def _pick(a: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``a[n, ys[n, ...], ...]`` for ``a`` of shape (N, C, ...)."""
    if a.ndim == 2:
        return a[np.arange(a.shape[0]), ys]
    return np.take_along_axis(a, ys[:, None], axis=1)[:, 0]


def _sub_at(a: np.ndarray, ys: np.ndarray, v) -> None:
    """``a[n, ys[n, ...], ...] -= v`` in place (``v`` a number or shaped like ``ys``)."""
    if a.ndim == 2:
        a[np.arange(a.shape[0]), ys] -= v
        return
    idx = ys[:, None]
    np.put_along_axis(a, idx, np.take_along_axis(a, idx, axis=1) - _cls_axis(v), axis=1)


def _cls_axis(v):
    """Per-position values shaped to broadcast against (N, C, ...)."""
    return v if np.ndim(v) == 0 else np.expand_dims(v, 1)


def _per_class(w: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) weight shaped to broadcast against (N, C, ...)."""
    return work(w).reshape((-1,) + (1,) * (ndim - 2))


def _reduce_into(out: np.ndarray, loss, reduction: str, denom) -> None:
    if reduction == "none":
        out[...] = loss
    elif reduction == "sum":
        out[...] = np.sum(loss)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            out[...] = np.sum(loss) / denom


def _position_grad(dout: np.ndarray, reduction: str, denom):
    """The gradient reaching each position's loss: a number for 'mean'/'sum', else an array."""
    g = work(dout)
    if reduction == "none":
        return g
    g = g.item()
    if reduction == "mean":
        with np.errstate(divide="ignore", invalid="ignore"):
            g = float(np.float64(g) / denom)  # inf (or nan) when nothing counts, as in PyTorch
    return g


def _counted(v, mask):
    """``v`` (a number or shaped like the targets) where a position counts, exactly 0 where
    its target is ignored: an ignored position gets no gradient even when the mean's
    denominator is 0 (PyTorch skips it rather than multiplying by 0)."""
    if mask is None:
        return v
    with np.errstate(invalid="ignore"):
        return np.where(mask, v, 0.0)


def _mean_denominator(wy, ys) -> float:
    return float(ys.size) if wy is None else float(np.sum(wy))


# ---- cross_entropy ----------------------------------------------------------------------------

cross_entropy = register("cross_entropy", grad_uses_outputs=True, doc=(
    "Softmax cross entropy over dim 1 with class-index or class-probability targets; "
    "outputs (loss, softmax probabilities)."), amp="deny")


@cross_entropy.infer
def _(inputs, attrs):
    shape = _class_infer("cross_entropy", inputs, attrs, allow_probs=True)
    x = inputs[0]
    return [Meta(shape, x.dtype), Meta(tuple(x._shape), x.dtype)]


@cross_entropy.sbp
def _(inputs, attrs):
    """Samples split (dim 0 of input and target; a class weight broadcast): per-sample losses
    split, a summed loss partial; the mean's denominator depends on the targets, so a mean
    runs on broadcast inputs."""
    yield from _batch_split_sbp(inputs, attrs, n_extra=1)


def _batch_split_sbp(inputs, attrs, n_extra: int = 0):
    """Samples split (dim 0 of input and target; a class weight broadcast): per-sample losses
    split, a summed loss partial, and ``n_extra`` saved outputs split. A mean's denominator
    depends on every rank's targets: ``F.cross_entropy``/``F.nll_loss`` of a global tensor
    divide a summed loss by it instead."""
    if len(inputs[0]._shape) < 2 or attrs["reduction"] == "mean":
        return
    ins = (S(0), S(0)) + ((B,) * (len(inputs) - 2))
    yield Sig(ins, (S(0) if attrs["reduction"] == "none" else P,) + (S(0),) * n_extra)


def _batch_split_backward_sbp(inputs, attrs):
    """``<loss>_backward`` on split samples: dout split (per-sample losses) or broadcast (a
    summed loss), the forward's inputs and saved outputs as in the forward, gradients split."""
    if len(inputs[1]._shape) < 2 or attrs["reduction"] == "mean":
        return
    ins = [S(0) if attrs["reduction"] == "none" else B] + [S(0)] * (len(inputs) - 1)
    if len(inputs) > 3 and tuple(inputs[3]._shape) == (inputs[1]._shape[1],) \
            and tuple(inputs[3]._shape) != tuple(inputs[1]._shape):
        ins[3] = B  # the class weight
    yield Sig(tuple(ins), (S(0),) * sum(1 for x in attrs["needs"] if x))


# Within this spread of values one shift for the whole (N, C) batch keeps every row's
# exponentials finite and its sum above 0; log-softmax then loses at most spread * eps.
_SHARED_SHIFT_SPREAD = 20.0


def _shifted(x: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """``x`` minus a per-row upper bound (the row max, or the batch max when the values spread
    little: two cheap full reductions instead of a slow per-row one), written into ``buf``
    when given and its dtype allows."""
    xs = work(x)
    out = buf if buf is not None and buf.dtype == xs.dtype else np.empty(xs.shape, xs.dtype)
    if xs.ndim == 2 and xs.size:
        hi = xs.max()
        if hi - xs.min() <= _SHARED_SHIFT_SPREAD:  # False for inf and nan: per-row then
            np.subtract(xs, hi, out=out)
            return out
    np.subtract(xs, xs.max(axis=1, keepdims=True), out=out)
    return out


def _class_sum(a: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Sum over dim 1 of (N, C, ...), weighted by the (C,) ``w`` if given; keeps dim 1."""
    if a.ndim == 2:  # a matrix-vector product is several times faster than np.sum here
        return sum_keepdim(a, 1) if w is None else (a @ w.astype(a.dtype))[:, None]
    if w is not None:
        a = a * _per_class(w, a.ndim)
    return np.sum(a, axis=1, keepdims=True)


def _softmax_shifted(s: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Turn shifted scores ``s`` into probabilities (in place; copied to ``prob``); return the
    log of the normaliser, shaped (N, ...)."""
    np.exp(s, out=s)
    total = _class_sum(s)
    np.divide(s, total, out=s)
    if s is not prob:
        prob[...] = s
    return np.log(total[:, 0])


@cross_entropy.kernel("cpu")
def _(ins, outs, attrs):
    x, y = ins[0], ins[1]
    w = ins[2] if len(ins) > 2 else None
    loss_out, prob = outs
    if x.ndim == 1:
        x, y, loss_out, prob = _batched(x, y, loss_out, prob)
    n_cls, eps, red = x.shape[1], attrs["label_smoothing"], attrs["reduction"]
    s = _shifted(x, prob)
    if is_floating(y.dtype):  # class probabilities
        q = work(y)
        if eps:
            q = q * (1.0 - eps) + eps / n_cls
        a = q if w is None else q * _per_class(w, x.ndim)
        dot = np.sum(a * s, axis=1)
        lse = _softmax_shifted(s, prob)
        loss = np.sum(a, axis=1) * lse - dot
        _reduce_into(loss_out, loss, red, float(loss.size))
        return
    mask, ys = _class_targets("cross_entropy", y, n_cls, attrs["ignore_index"])
    wy = _target_weights(w, ys, mask, s.dtype)
    picked = _pick(s, ys)
    if eps:
        smooth = _class_sum(s, None if w is None else work(w))[:, 0]
        w_total = n_cls if w is None else float(np.sum(work(w)))
    lse = _softmax_shifted(s, prob)
    loss = lse - picked
    if wy is not None:
        loss *= wy
    if eps:
        smooth = w_total * lse - smooth
        if mask is not None:
            smooth *= mask
        loss = (1.0 - eps) * loss + (eps / n_cls) * smooth
    _reduce_into(loss_out, loss, red, _mean_denominator(wy, ys))


def _weight_needs_no_grad(name: str, rule):
    def checked(ctx, *douts):
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            raise RuntimeError(f"{name}: the gradient with respect to weight is not "
                               f"implemented (use a weight that does not require grad)")
        return rule(ctx, *douts)
    return checked


cross_entropy.grad(_weight_needs_no_grad(
    "cross_entropy", grad_rule("cross_entropy", extra_outputs=True)))

cross_entropy_backward = register("cross_entropy_backward", amp="deny", doc=(
    "Gradients of cross_entropy: inputs (dout, input, target[, weight], probabilities)."))
cross_entropy_backward.infer(backward_infer)
cross_entropy_backward.sbp(_batch_split_backward_sbp)
cross_entropy_backward.grad(no_double_backward("cross_entropy"))


@cross_entropy_backward.kernel("cpu")
def _(ins, outs, attrs):
    dout, x, y, prob = ins[0], ins[1], ins[2], ins[-1]
    w = ins[3] if len(ins) > 4 else None
    needs, outs = attrs["needs"], list(outs)
    dx = outs.pop(0) if needs[0] else None
    dt = outs.pop(0) if needs[1] else None
    if x.ndim == 1:
        x, y, prob, dx, dt = _batched(x, y, prob, dx, dt)
        if attrs["reduction"] == "none":
            dout = dout.reshape(1)
    n_cls, eps, red = x.shape[1], attrs["label_smoothing"], attrs["reduction"]
    wc = None if w is None else _per_class(w, x.ndim)
    if is_floating(y.dtype):
        g = _cls_axis(_position_grad(dout, red, y.size // n_cls))
        q = work(y)
        if eps:
            q = q * (1.0 - eps) + eps / n_cls
        a = q if wc is None else q * wc
        if dx is not None:
            np.multiply(work(prob) * np.sum(a, axis=1, keepdims=True) - a, g, out=dx,
                        casting="unsafe")
        if dt is not None:
            s = _shifted(x)
            logp = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
            coef = -(1.0 - eps) * g if wc is None else -(1.0 - eps) * g * wc
            np.multiply(logp, coef, out=dt, casting="unsafe")
        return
    if dx is None:
        return
    mask, ys = _class_targets("cross_entropy", y, n_cls, attrs["ignore_index"])
    wy = _target_weights(w, ys, mask, work_dtype(x))
    g = _position_grad(dout, red, _mean_denominator(wy, ys))
    gm = _counted(g, mask)  # the gradient of counted positions
    with np.errstate(invalid="ignore"):  # inf * 0 weight: NaN, as in PyTorch
        at_target = gm * (1.0 - eps) if w is None else _counted(g * (1.0 - eps) * wy, mask)
        total = at_target
        if eps:
            w_total = n_cls if w is None else float(np.sum(work(w)))
            total = at_target + gm * (eps * w_total / n_cls)
        np.multiply(prob, _cls_axis(total), out=dx, casting="unsafe")
    if eps:
        spread = _cls_axis(gm * (eps / n_cls))
        dx -= spread if wc is None else spread * wc
    _sub_at(dx, ys, at_target)


# ---- nll_loss ---------------------------------------------------------------------------------

nll_loss = register("nll_loss", amp="deny",
                    doc="Negative log likelihood of class indices over dim 1.")


@nll_loss.infer
def _(inputs, attrs):
    shape = _class_infer("nll_loss", inputs, attrs, allow_probs=False)
    return [Meta(shape, inputs[0].dtype)]


@nll_loss.kernel("cpu")
def _(ins, outs, attrs):
    x, y = ins[0], ins[1]
    w = ins[2] if len(ins) > 2 else None
    out = outs[0]
    if x.ndim == 1:
        x, y, out = _batched(x, y, out)
    mask, ys = _class_targets("nll_loss", y, x.shape[1], attrs["ignore_index"])
    wy = _target_weights(w, ys, mask, work_dtype(x))
    loss = -_pick(work(x), ys)
    if wy is not None:
        loss *= wy
    _reduce_into(out, loss, attrs["reduction"], _mean_denominator(wy, ys))


nll_loss.grad(_weight_needs_no_grad("nll_loss", grad_rule("nll_loss")))
nll_loss.sbp(_batch_split_sbp)

nll_loss_backward = register("nll_loss_backward", doc=(
    "Gradient of nll_loss: inputs (dout, input, target[, weight])."), amp="deny")
nll_loss_backward.infer(backward_infer)
nll_loss_backward.sbp(_batch_split_backward_sbp)


@nll_loss_backward.grad
def _(ctx, ddx):
    """nll_loss is linear in its input, so its gradient dx is linear in dout alone: the
    gradient of dout is nll_loss of ddx (same target, weight, reduction), the input's is zero
    (as PyTorch)."""
    needs = ctx.needs_input_grad
    if ddx is None:
        return (None,) * len(needs)
    dout, x, y = ctx.inputs[:3]
    rest = list(ctx.inputs[3:])
    ddout = F.call("nll_loss", ddx, y, *rest, ignore_index=ctx.attrs["ignore_index"],
                   reduction=ctx.attrs["reduction"]) if needs[0] else None
    dxx = F.zeros_like(x) if needs[1] else None
    return (ddout, dxx) + (None,) * (len(needs) - 2)


@nll_loss_backward.kernel("cpu")
def _(ins, outs, attrs):
    dout, x, y = ins[0], ins[1], ins[2]
    w = ins[3] if len(ins) > 3 else None
    dx = outs[0]
    if x.ndim == 1:
        x, y, dx = _batched(x, y, dx)
        if attrs["reduction"] == "none":
            dout = dout.reshape(1)
    mask, ys = _class_targets("nll_loss", y, x.shape[1], attrs["ignore_index"])
    wy = _target_weights(w, ys, mask, work_dtype(x))
    g = _position_grad(dout, attrs["reduction"], _mean_denominator(wy, ys))
    dx.fill(0)
    with np.errstate(invalid="ignore"):
        _sub_at(dx, ys, _counted(g if wy is None else g * wy, mask))


from actorflow.ops import loss_pointwise  # noqa: E402,F401  (registers the pointwise losses)
from actorflow.ops import loss_rows  # noqa: E402,F401  (cross_entropy's row forms in C)
