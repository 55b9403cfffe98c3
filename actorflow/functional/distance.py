"""Distances and similarities between tensors: cosine_similarity and pairwise_distance
(composites of norms and elementwise ops, so their gradients come from those ops)."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.functional.elementwise import add, cast, clamp_min, div, expand, mul, sub
from actorflow.functional.reduce import sum
from actorflow.functional.reduce_extrema import norm
from actorflow.functional.shape import unsqueeze
from actorflow.ops._common import broadcast_shapes, promote
from actorflow.tensor import Tensor


def _float_pair(name: str, x1: Tensor, x2: Tensor) -> tuple:
    """``x1`` and ``x2`` broadcast to one shape, in their common floating dtype."""
    d = promote([x1, x2])
    if not d.is_floating_point:
        d = dt.get_default_dtype()
    shape = broadcast_shapes(name, x1._shape, x2._shape)
    pair = []
    for x in (x1, x2):
        if x.dtype is not d:
            x = cast(x, d)
        if tuple(x._shape) != shape:
            x = expand(x, shape)
        pair.append(x)
    return tuple(pair)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` over ``dim`` (the inputs
    broadcast against each other; norms are 2-norms along ``dim``)."""
    a, b = _float_pair("cosine_similarity", x1, x2)
    na = clamp_min(norm(a, 2, dim, keepdim=True), eps)
    nb = clamp_min(norm(b, 2, dim, keepdim=True), eps)
    return sum(mul(div(a, na), div(b, nb)), dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dim (the inputs broadcast)."""
    a, b = _float_pair("pairwise_distance", x1, x2)
    return norm(add(sub(a, b), eps), p, -1 if a._shape else None, keepdim=keepdim)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode=None) -> Tensor:
    """The ``p``-norm distances between each row of ``x1`` (``..., P, M``) and each row of
    ``x2`` (``..., R, M``): a ``..., P, R`` tensor (leading dims broadcast)."""
    if len(x1._shape) < 2 or len(x2._shape) < 2 or x1._shape[-1] != x2._shape[-1]:
        raise ValueError(f"cdist: expected inputs of at least 2 dims with the same last dim, "
                         f"got shapes {tuple(x1._shape)} and {tuple(x2._shape)}")
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    a, b = _float_pair("cdist", unsqueeze(x1, -2), unsqueeze(x2, -3))
    return norm(sub(a, b), p, -1)


__all__ = ["cosine_similarity", "pairwise_distance", "cdist"]
