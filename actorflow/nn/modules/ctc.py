"""``nn.CTCLoss`` (PyTorch's); the function is ``actorflow.functional.ctc_loss``."""
from __future__ import annotations

from actorflow.functional.ctc import ctc_loss
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

__all__ = ["CTCLoss"]


class CTCLoss(Module):
    """Connectionist temporal classification loss (see ``functional.ctc_loss``)."""

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__()
        self.blank, self.reduction, self.zero_infinity = blank, reduction, zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths,
                target_lengths) -> Tensor:
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity)
