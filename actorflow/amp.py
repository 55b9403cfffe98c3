"""Loss scaling for float16 training (``flow.amp``): OneFlow's ``GradScaler`` and
``StaticGradScaler``; ``flow.amp.autocast`` is ``flow.autocast`` (``actorflow/autocast_mode.py``).

In an ``nn.Graph`` (``config.enable_amp(True)``, ``graph.set_grad_scaler(scaler)``) the scaler's
settings become the graph's loss scale: the Job multiplies the loss's seed gradient by the
scale, unscales the gradients and, for the dynamic ``GradScaler``, skips the updates of a step
whose gradients are not all finite and adapts the scale
(``actorflow/nn/graph/optimizer_emission.py``).

Eagerly, ``GradScaler`` also works as PyTorch's does: ``scaler.scale(loss).backward()``,
``scaler.step(optimizer)`` (unscales the gradients, skips ``optimizer.step()`` when one is not
finite), ``scaler.update()``.
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.autocast_mode import autocast
from actorflow.autograd.grad_mode import no_grad
from actorflow.tensor import Tensor


class GradScaler:
    """A dynamic loss scale: starts at ``init_scale``, multiplied by ``backoff_factor`` after a
    step with non-finite gradients (that step updates nothing) and by ``growth_factor`` after
    ``growth_interval`` finite steps in a row. As in OneFlow, ``backoff_factor`` must be
    ``1 / growth_factor``."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000):
        if not init_scale > 0:
            raise ValueError(f"GradScaler: init_scale must be > 0, got {init_scale}")
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not math.isclose(backoff_factor, 1.0 / growth_factor):
            raise ValueError(f"GradScaler: only 1.0/growth_factor is supported as "
                             f"backoff_factor, got {backoff_factor}")
        if int(growth_interval) < 1:
            raise ValueError(f"GradScaler: growth_interval must be >= 1, got {growth_interval}")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = self._init_scale
        self._growth_tracker = 0
        self._unscaled: dict = {}  # id(optimizer) -> whether its gradients had a non-finite

    # -- eager use ---------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale."""
        return self._scale

    def scale(self, outputs):
        """``outputs`` (a tensor, or a list/tuple of them) times the current scale."""
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected a tensor or a list of tensors, got "
                        f"{type(outputs).__name__}")

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (once per step; ``step``
        does it when not called before), noting whether one is not finite."""
        if id(optimizer) in self._unscaled:
            raise RuntimeError("GradScaler.unscale_() has already been called on this "
                               "optimizer since the last update()")
        inv = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    found = found or not bool(np.isfinite(p.grad.numpy()).all())
        self._unscaled[id(optimizer)] = found

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless its unscaled gradients hold an inf or
        NaN (then the step is skipped and None returned)."""
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._unscaled[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: float | None = None) -> None:
        """After the step: back off when a step found a non-finite gradient, grow after
        ``growth_interval`` good steps; ``new_scale`` sets the scale instead."""
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
            self._growth_tracker = 0
        elif any(self._unscaled.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        elif self._unscaled:
            self._growth_tracker += 1
            if self._growth_tracker >= self._growth_interval:
                grown = self._scale * self._growth_factor
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
        self._unscaled = {}

    def is_enabled(self) -> bool:
        return True

    def state_dict(self) -> dict:
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: dict) -> None:
        self._scale = float(state["scale"])
        self._growth_factor = float(state.get("growth_factor", self._growth_factor))
        self._backoff_factor = float(state.get("backoff_factor", self._backoff_factor))
        self._growth_interval = int(state.get("growth_interval", self._growth_interval))
        self._growth_tracker = int(state.get("_growth_tracker", 0))


class StaticGradScaler:
    """A fixed loss scale (``nn.Graph`` only, as OneFlow's): the loss's gradient is scaled by
    ``scale_factor`` and the gradients divided by it before the update; no step is skipped."""

    def __init__(self, scale_factor: float):
        if not scale_factor > 0.0:
            raise ValueError("StaticGradScaler's scale_factor must > 0.0")
        self._scale_factor = float(scale_factor)


__all__ = ["GradScaler", "StaticGradScaler", "autocast"]
