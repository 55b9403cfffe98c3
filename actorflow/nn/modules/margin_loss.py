"""OneFlow's ``nn.CombinedMarginLoss`` (SphereFace/ArcFace/CosFace margins on the target
logit); the function is ``actorflow.functional.combined_margin_loss``."""
from __future__ import annotations

from actorflow.functional.margin_loss import combined_margin_loss
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

__all__ = ["CombinedMarginLoss"]


class CombinedMarginLoss(Module):
    """``x[i, label[i]] = cos(m1 * arccos(x[i, label[i]]) + m2) - m3``, other logits kept."""

    def __init__(self, m1: float = 1.0, m2: float = 0.0, m3: float = 0.0) -> None:
        super().__init__()
        self.m1, self.m2, self.m3 = m1, m2, m3

    def forward(self, x: Tensor, label: Tensor) -> Tensor:
        return combined_margin_loss(x, label, self.m1, self.m2, self.m3)

    def extra_repr(self) -> str:
        return f"m1={self.m1}, m2={self.m2}, m3={self.m3}"
