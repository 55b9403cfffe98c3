"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``.

Both modify ``.grad`` in place through registered ops (``grad_norm``, ``clip_grad_by_norm``,
``clip_grad_by_value`` in ``actorflow/ops/clip_grad_ops.py``).
"""
from __future__ import annotations

import math
from typing import Iterable, Union

import numpy as np

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.tensor import EagerBlob, Tensor

_NORM = registry.get("grad_norm")
_CLIP_NORM = registry.get("clip_grad_by_norm")
_CLIP_VALUE = registry.get("clip_grad_by_value")

_TensorOrTensors = Union[Tensor, Iterable[Tensor]]


def _with_grads(parameters: _TensorOrTensors) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def _writable_grad(p: Tensor) -> Tensor:
    """``p.grad``, replaced by a private copy first if its storage can't be written (a
    broadcast view) or it is part of a graph."""
    g = p.grad
    if g.grad_fn is not None or g.requires_grad:
        g = g.detach()
    if isinstance(g._h, EagerBlob) and not g._h.raw.flags.writeable:
        g = g.clone()
    if g is not p.grad:
        p.grad = g
    return g


def clip_grad_norm_(parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    fused: bool = False, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total norm (all gradients
    taken as one vector) is at most ``max_norm``; returns the total norm before clipping.

    ``norm_type`` may be ``inf``/``-inf`` (or the strings ``"inf"``/``"-inf"``) for the largest /
    smallest absolute value. The scale is ``min(max_norm / (total_norm + 1e-6), 1)``.
    The argument order follows OneFlow (``fused`` before ``error_if_nonfinite``); ``fused`` and
    ``foreach`` only choose kernels elsewhere and change nothing on CPU.
    """
    params = _with_grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not params:
        return Tensor._wrap(np.zeros((), dtype=np.float32), dt.float32)
    total = apply(_NORM, [p.grad for p in params], {"norm_type": norm_type})[0]
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the "
                           f"gradients is non-finite ({total.item()}), so it cannot be clipped; "
                           f"pass error_if_nonfinite=False to scale by it anyway")
    attrs = {"max_norm": max_norm}
    for p in params:
        apply(_CLIP_NORM, [_writable_grad(p), total], attrs)
    return total


def clip_grad_value_(parameters: _TensorOrTensors, clip_value: float) -> None:
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    attrs = {"clip_value": float(clip_value)}
    for p in _with_grads(parameters):
        apply(_CLIP_VALUE, [_writable_grad(p)], attrs)


__all__ = ["clip_grad_norm_", "clip_grad_value_"]
