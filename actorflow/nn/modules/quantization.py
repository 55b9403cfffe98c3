"""Quantization modules (OneFlow's): ``MinMaxObserver``, ``MovingAverageMinMaxObserver``,
``Quantization`` and ``FakeQuantization``, over the ops of ``actorflow/ops/quantization.py``."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.functional import quantize as Q
from actorflow.functional.creation import zeros
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

__all__ = ["MinMaxObserver", "MovingAverageMinMaxObserver", "Quantization",
           "FakeQuantization"]


class _QuantAttrs(Module):
    def __init__(self, quantization_formula: str = "google", quantization_bit: int = 8,
                 quantization_scheme: str = "symmetric") -> None:
        super().__init__()
        self.quantization_formula = quantization_formula
        self.quantization_bit = quantization_bit
        self.quantization_scheme = quantization_scheme

    def _q(self) -> tuple:
        return self.quantization_formula, self.quantization_bit, self.quantization_scheme

    def extra_repr(self) -> str:
        return (f"quantization_formula={self.quantization_formula!r}, quantization_bit="
                f"{self.quantization_bit}, quantization_scheme={self.quantization_scheme!r}")


class MinMaxObserver(_QuantAttrs):
    """``(scale, zero_point)`` of the input from its min and max; per channel (dim 0) when
    ``per_layer_quantization`` is False."""

    def __init__(self, quantization_formula: str = "google", quantization_bit: int = 8,
                 quantization_scheme: str = "symmetric",
                 per_layer_quantization: bool = True) -> None:
        super().__init__(quantization_formula, quantization_bit, quantization_scheme)
        self.per_layer_quantization = per_layer_quantization

    def forward(self, input: Tensor) -> tuple:
        return Q.min_max_observer(input, *self._q(), self.per_layer_quantization)


class MovingAverageMinMaxObserver(_QuantAttrs):
    """``(scale, zero_point)`` from moving averages of the input's range (buffers
    ``moving_max``, ``moving_min``), updated while training for the first
    ``stop_update_after_iters`` steps of ``current_train_step``."""

    def __init__(self, stop_update_after_iters: int = 1, quantization_formula: str = "google",
                 quantization_bit: int = 8, quantization_scheme: str = "symmetric",
                 momentum: float = 0.95) -> None:
        super().__init__(quantization_formula, quantization_bit, quantization_scheme)
        self.stop_update_after_iters = stop_update_after_iters
        self.momentum = momentum
        self.register_buffer("moving_max", zeros(1, dtype=dt.float32))
        self.register_buffer("moving_min", zeros(1, dtype=dt.float32))

    def reset_running_stats(self) -> None:
        """Moving max and min back to 0 (the next batch starts them)."""
        self.moving_max.fill_(0)
        self.moving_min.fill_(0)

    def forward(self, input: Tensor, current_train_step: Tensor) -> tuple:
        return Q.moving_average_min_max_observer(
            input, current_train_step, self.moving_max, self.moving_min, self.training,
            self.stop_update_after_iters, *self._q(), self.momentum)


class Quantization(_QuantAttrs):
    """The input as integer levels for a ``scale`` and ``zero_point``."""

    def forward(self, input: Tensor, scale: Tensor, zero_point: Tensor) -> Tensor:
        return Q.quantization(input, scale, zero_point, *self._q())


class FakeQuantization(_QuantAttrs):
    """The input quantized and dequantized (quantization-aware training); the gradient
    passes straight through."""

    def forward(self, input: Tensor, scale: Tensor, zero_point: Tensor) -> Tensor:
        return Q.fake_quantization(input, scale, zero_point, *self._q())
