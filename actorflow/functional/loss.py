"""Loss functions (``flow.cross_entropy``, ``flow.mse_loss``, ...) with torch.nn.functional's
names, signatures and semantics. Each is one fused op (see ``actorflow/ops/loss.py`` and
``actorflow/ops/loss_pointwise.py``); ``loss_backward`` is what their gradient rules call.
Margin ranking, triplet margin and OneFlow's sparse softmax cross-entropy are composites of
registered ops.

``size_average`` and ``reduce`` are PyTorch's deprecated spellings of ``reduction``.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.distance import pairwise_distance
from actorflow.ops import registry
from actorflow.tensor import Tensor

_cross_entropy = registry.get("cross_entropy")
_nll_loss = registry.get("nll_loss")
_mse = registry.get("mse_loss")
_l1 = registry.get("l1_loss")
_smooth_l1 = registry.get("smooth_l1_loss")
_huber = registry.get("huber_loss")
_kl_div = registry.get("kl_div")
_bce = registry.get("binary_cross_entropy")
_bce_logits = registry.get("binary_cross_entropy_with_logits")
_BACKWARD = {op.name: registry.get(op.name + "_backward") for op in (
    _cross_entropy, _nll_loss, _mse, _l1, _smooth_l1, _huber, _kl_div, _bce, _bce_logits)}


def loss_backward(name: str, inputs: list, attrs: dict) -> list:
    """Run ``<name>_backward``: the gradients a loss op's rule asks for (see ``ops/loss.py``)."""
    return apply(_BACKWARD[name], inputs, attrs)


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _tensors(name: str, **named) -> None:
    for label, t in named.items():
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{name}: {label} must be a Tensor, got {type(t).__name__}")


def _pointwise(op, name: str, input: Tensor, target: Tensor, reduction: str, weight=None,
               pos_weight=None, **attrs) -> Tensor:
    _tensors(name, input=input, target=target, weight=weight, pos_weight=pos_weight)
    inputs = [input, target]
    if weight is not None:
        inputs.append(weight)
    if pos_weight is not None:
        inputs.append(pos_weight)
    attrs.update(reduction=reduction, has_weight=weight is not None,
                 has_pos_weight=pos_weight is not None)
    return apply(op, inputs, attrs)[0]


def _global_mean(op, inputs: list, attrs: dict) -> Tensor:
    """'mean' of a class loss on global tensors: the summed loss (partial on a split batch, so
    the logits are not gathered) divided by the summed target weights (the positions counted,
    each weighted by its class's weight), which all ranks add up: on a split batch the result
    is a partial sum, each rank's share of the mean, as OneFlow's."""
    from actorflow.framework.sbp import broadcast

    x, y = inputs[0], inputs[1]
    total = apply(op, inputs, dict(attrs, reduction="sum"))[0]
    if y.dtype.is_floating_point:  # class probabilities: every position counts once
        n_cls = x.shape[1] if x.dim() > 1 else x.shape[0]
        return total / float(max(x.numel() // n_cls, 1) if x.numel() else 0.0)
    keep = y != attrs["ignore_index"]
    if len(inputs) > 2:
        from actorflow.functional.nn_ops import embedding

        n_cls = x.shape[1] if x.dim() > 1 else x.shape[0]
        rows = embedding(y.clamp(0, n_cls - 1), inputs[2].detach().reshape(-1, 1))
        counted = (rows.reshape(tuple(y.shape)) * keep.to(rows.dtype)).sum()
    else:
        counted = keep.sum()
    denom = counted.to(total.dtype).to_global(sbp=[broadcast] * len(counted.sbp))
    return total * denom.reciprocal()  # partial times broadcast stays partial


def _class_loss(op, inputs: list, attrs: dict) -> Tensor:
    if attrs["reduction"] == "mean" and inputs[0].is_global:
        return _global_mean(op, inputs, attrs)
    return apply(op, inputs, attrs)[0]


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of ``softmax(input, dim=1)`` against class indices ``(N, d1, ...)`` or
    class probabilities (the input's shape); ``weight`` has one value per class, positions whose
    target is ``ignore_index`` are left out, and 'mean' divides by the summed target weights."""
    _tensors("cross_entropy", input=input, target=target, weight=weight)
    inputs = [input, target] if weight is None else [input, target, weight]
    return _class_loss(_cross_entropy, inputs, {
        "ignore_index": int(ignore_index), "label_smoothing": float(label_smoothing),
        "reduction": _reduction(size_average, reduce, reduction)})


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood: ``-input[n, target[n]]`` for log-probabilities ``input``
    of shape ``(N, C, d1, ...)``, weighted and reduced as in ``cross_entropy``."""
    _tensors("nll_loss", input=input, target=target, weight=weight)
    inputs = [input, target] if weight is None else [input, target, weight]
    return _class_loss(_nll_loss, inputs, {
        "ignore_index": int(ignore_index),
        "reduction": _reduction(size_average, reduce, reduction)})


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Squared error; with ``weight``, 'mean' divides by the sum of the weights."""
    return _pointwise(_mse, "mse_loss", input, target, _reduction(size_average, reduce,
                      reduction), weight, weight_norm=True)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Absolute error; with ``weight``, 'mean' divides by the sum of the weights."""
    return _pointwise(_l1, "l1_loss", input, target, _reduction(size_average, reduce,
                      reduction), weight, weight_norm=True)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Squared error below ``beta`` (scaled by 1/beta), absolute error above it."""
    return _pointwise(_smooth_l1, "smooth_l1_loss", input, target,
                      _reduction(size_average, reduce, reduction), beta=float(beta))


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Squared error below ``delta``, ``delta``-scaled absolute error above it."""
    return _pointwise(_huber, "huber_loss", input, target, reduction, weight,
                      delta=float(delta))


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence of log-probabilities ``input`` from ``target`` (log-probabilities too when
    ``log_target``); 'batchmean' divides the sum by the batch size."""
    return _pointwise(_kl_div, "kl_div", input, target,
                      _reduction(size_average, reduce, reduction), log_target=bool(log_target))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities ``input`` (logs clamped at -100); ``weight``
    broadcasts to the input and scales each element."""
    return _pointwise(_bce, "binary_cross_entropy", input, target,
                      _reduction(size_average, reduce, reduction), weight)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)``, computed stably from the logits;
    ``pos_weight`` (broadcast over the input) scales the positive-target terms."""
    return _pointwise(_bce_logits, "binary_cross_entropy_with_logits", input, target,
                      _reduction(size_average, reduce, reduction), weight, pos_weight)


def _reduce(name: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``, reduced."""
    from actorflow.functional.elementwise import relu

    reduction = _reduction(size_average, reduce, reduction)
    if not (len(input1._shape) == len(input2._shape) == len(target._shape)):
        raise ValueError(f"margin_ranking_loss: all input tensors should have the same number "
                         f"of dims, got shapes {tuple(input1._shape)}, {tuple(input2._shape)} "
                         f"and {tuple(target._shape)}")
    loss = relu(-target * (input1 - input2) + float(margin))
    return _reduce("margin_ranking_loss", loss, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the p-norm distance (``swap``: use the
    smaller of d(a, n) and d(p, n))."""
    from actorflow.functional.elementwise import relu
    from actorflow.functional.elementwise import minimum

    reduction = _reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, float(p), float(eps))
    d_neg = pairwise_distance(anchor, negative, float(p), float(eps))
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, float(p), float(eps)))
    loss = relu(d_pos - d_neg + float(margin))
    return _reduce("triplet_margin_loss", loss, reduction)


def sparse_softmax_cross_entropy(labels: Tensor, logits: Tensor) -> Tensor:
    """OneFlow's per-sample ``-log softmax(logits)[label]`` (no reduction)."""
    return cross_entropy(logits, labels, reduction="none")


__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "loss_backward", "margin_ranking_loss", "triplet_margin_loss",
           "sparse_softmax_cross_entropy"]
