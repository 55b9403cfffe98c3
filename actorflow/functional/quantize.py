"""Quantization (OneFlow's ``flow._C`` functions): ``min_max_observer``,
``moving_average_min_max_observer``, ``quantization`` and ``fake_quantization``; the ops and
their formulas are in ``actorflow/ops/quantization.py``."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["min_max_observer", "moving_average_min_max_observer", "quantization",
           "fake_quantization"]

_MIN_MAX = registry.get("min_max_observer")
_MOVING = registry.get("moving_average_min_max_observer")
_QUANT = registry.get("quantization")
_FAKE = registry.get("fake_quantization")


def _qattrs(formula: str, bit: int, scheme: str) -> dict:
    return {"quantization_formula": formula, "quantization_bit": int(bit),
            "quantization_scheme": scheme}


def min_max_observer(input: Tensor, quantization_formula: str = "google",
                     quantization_bit: int = 8, quantization_scheme: str = "symmetric",
                     per_layer_quantization: bool = True) -> tuple:
    """(scale, zero_point) of ``input`` from its min and max (per layer, or per index of
    dim 0)."""
    attrs = _qattrs(quantization_formula, quantization_bit, quantization_scheme)
    attrs["per_layer_quantization"] = bool(per_layer_quantization)
    return tuple(apply(_MIN_MAX, [input], attrs))


def moving_average_min_max_observer(input: Tensor, current_train_step: Tensor,
                                    moving_max: Tensor, moving_min: Tensor, training: bool,
                                    stop_update_after_iters: int,
                                    quantization_formula: str = "google",
                                    quantization_bit: int = 8,
                                    quantization_scheme: str = "symmetric",
                                    momentum: float = 0.95) -> tuple:
    """(scale, zero_point) from moving averages of ``input``'s range, kept in ``moving_max``
    and ``moving_min`` (updated in place while training, up to ``stop_update_after_iters``)."""
    attrs = _qattrs(quantization_formula, quantization_bit, quantization_scheme)
    attrs.update(training=bool(training), stop_update_after_iters=int(stop_update_after_iters),
                 momentum=float(momentum))
    return tuple(apply(_MOVING, [input, current_train_step, moving_max, moving_min], attrs))


def quantization(input: Tensor, scale: Tensor, zero_point: Tensor,
                 quantization_formula: str = "google", quantization_bit: int = 8,
                 quantization_scheme: str = "symmetric") -> Tensor:
    """``input`` as integer levels (in its own dtype) for ``scale`` and ``zero_point``."""
    attrs = _qattrs(quantization_formula, quantization_bit, quantization_scheme)
    return apply(_QUANT, [input, scale, zero_point], attrs)[0]


def fake_quantization(input: Tensor, scale: Tensor, zero_point: Tensor,
                      quantization_formula: str = "google", quantization_bit: int = 8,
                      quantization_scheme: str = "symmetric") -> Tensor:
    """``input`` quantized and dequantized; the gradient passes straight through."""
    attrs = _qattrs(quantization_formula, quantization_bit, quantization_scheme)
    return apply(_FAKE, [input, scale, zero_point], attrs)[0]
