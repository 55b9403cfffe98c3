"""More losses and sampling activations, composites of registered ops: margin ranking,
triplet margin, OneFlow's sparse softmax cross-entropy, Gumbel softmax."""
from __future__ import annotations

from actorflow.functional.distance import pairwise_distance
from actorflow.functional.loss import _reduction, cross_entropy
from actorflow.tensor import Tensor


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


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """Softmax of ``(logits + Gumbel noise) / tau`` along ``dim``; ``hard`` returns the one-hot
    of its argmax with the soft sample's gradient (straight-through)."""
    from actorflow.autograd import no_grad  # late: autograd sits above functional
    from actorflow.functional.activation import log
    from actorflow.functional.creation import rand_like, zeros_like
    from actorflow.functional.index import scatter
    from actorflow.functional.nn_ops import softmax
    from actorflow.functional.reduce_extrema import argmax

    with no_grad():
        u = rand_like(logits)
        gumbels = -log((-log(u.clamp(min=1e-20))).clamp(min=1e-20))
    y = softmax((logits + gumbels) / float(tau), dim=dim)
    if not hard:
        return y
    index = argmax(y, dim=dim, keepdim=True)
    y_hard = scatter(zeros_like(logits), dim, index, value=1.0)
    return y_hard - y.detach() + y


__all__ = ["margin_ranking_loss", "triplet_margin_loss",
           "sparse_softmax_cross_entropy", "gumbel_softmax"]
