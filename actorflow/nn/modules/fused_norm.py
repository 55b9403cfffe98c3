"""OneFlow's fused normalisation layers: ``FusedBatchNorm1d/2d/3d`` (batch norm, an optional
addend, then relu) and the deprecated ``RMSLayerNorm`` (T5's layer norm, ``RMSNorm`` over the
last dim)."""
from __future__ import annotations

import warnings

from actorflow.functional.elementwise import add, relu
from actorflow.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, RMSNorm
from actorflow.tensor import Tensor

__all__ = ["FusedBatchNorm1d", "FusedBatchNorm2d", "FusedBatchNorm3d", "RMSLayerNorm"]


class _FusedBatchNorm:
    """``relu(batch_norm(x) [+ addend])``, the running statistics as the batch norm's."""

    def forward(self, input: Tensor, addend: Tensor | None = None) -> Tensor:
        y = super().forward(input)
        if addend is not None:
            y = add(y, addend)
        return relu(y)


class FusedBatchNorm1d(_FusedBatchNorm, BatchNorm1d):
    """``relu(BatchNorm1d(x) [+ addend])``."""


class FusedBatchNorm2d(_FusedBatchNorm, BatchNorm2d):
    """``relu(BatchNorm2d(x) [+ addend])``."""


class FusedBatchNorm3d(_FusedBatchNorm, BatchNorm3d):
    """``relu(BatchNorm3d(x) [+ addend])``."""


class RMSLayerNorm(RMSNorm):
    """T5's layer norm: ``x / sqrt(mean(x**2, -1) + eps) * weight`` (deprecated in OneFlow in
    favour of ``RMSNorm``)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        warnings.warn("nn.RMSLayerNorm has been deprecated. Please use nn.RMSNorm instead.",
                      DeprecationWarning, stacklevel=2)
        super().__init__(hidden_size, eps=eps)

    @property
    def variance_epsilon(self) -> float:
        """OneFlow's name of ``eps``."""
        return self.eps
