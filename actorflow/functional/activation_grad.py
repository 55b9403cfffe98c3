"""The backward ops of the piecewise activations (``ops/activation_grad.py``) as functions
(``F.leaky_relu_grad(dy, x, negative_slope)``, ...): the activations' gradient rules call
them, and their own gradient rules call them again."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.tensor import Tensor

_LEAKY = registry.get("leaky_relu_grad")
_HARDTANH = registry.get("hardtanh_grad")
_THRESHOLD = registry.get("threshold_grad")
_SHRINK = registry.get("shrink_grad")
_HARDSIGMOID = registry.get("hardsigmoid_grad")
_NO_ATTRS: dict = {}


def leaky_relu_grad(dy: Tensor, x: Tensor, negative_slope: float) -> Tensor:
    """``dy`` where ``x > 0``, else ``dy * negative_slope``."""
    return apply(_LEAKY, [dy, x], {"negative_slope": float(negative_slope)})[0]


def hardtanh_grad(dy: Tensor, x: Tensor, min_val: float, max_val: float) -> Tensor:
    """``dy`` where ``min_val < x < max_val``, else 0."""
    return apply(_HARDTANH, [dy, x], {"min_val": min_val, "max_val": max_val})[0]


def threshold_grad(dy: Tensor, x: Tensor, threshold: float) -> Tensor:
    """``dy`` where ``x > threshold``, else 0."""
    return apply(_THRESHOLD, [dy, x], {"threshold": threshold})[0]


def shrink_grad(dy: Tensor, x: Tensor, lambd: float) -> Tensor:
    """``dy`` where ``|x| > lambd``, else 0 (hardshrink's and softshrink's gradient)."""
    return apply(_SHRINK, [dy, x], {"lambd": lambd})[0]


def hardsigmoid_grad(dy: Tensor, x: Tensor) -> Tensor:
    """``dy / 6`` where ``-3 < x < 3``, else 0."""
    return apply(_HARDSIGMOID, [dy, x], _NO_ATTRS)[0]


__all__ = ["leaky_relu_grad", "hardtanh_grad", "threshold_grad", "shrink_grad",
           "hardsigmoid_grad"]
