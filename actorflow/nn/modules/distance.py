"""CosineSimilarity and PairwiseDistance."""
from __future__ import annotations

from actorflow.functional.distance import cosine_similarity, pairwise_distance
from actorflow.nn.module import Module
from actorflow.tensor import Tensor


class CosineSimilarity(Module):
    """Cosine similarity of ``x1`` and ``x2`` along ``dim`` (see
    ``nn.functional.cosine_similarity``)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``p``-norm distance between ``x1`` and ``x2`` along the last dim (see
    ``nn.functional.pairwise_distance``)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
