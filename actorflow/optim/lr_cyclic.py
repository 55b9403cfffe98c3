"""Cyclical schedules: ``OneCycleLR`` and ``CyclicLR`` (PyTorch's semantics; OneFlow has the
same classes), in ``actorflow.optim.lr_scheduler``.

Both set, with ``cycle_momentum``, each group's momentum (``momentum``, or beta1 of ``betas``)
in the opposite sense of the learning rate. Their parameters are per param group (one value
or a list), so the closed form is per group: ``_at(i, step) -> (lr, momentum)``;
``get_lr(base_lr, step)`` answers for the group whose base learning rate is ``base_lr``.
"""
from __future__ import annotations

import math
from typing import Callable

from actorflow.optim.lr_scheduler import LRScheduler, _check_optimizer
from actorflow.optim.optimizer import Optimizer

__all__ = ["OneCycleLR", "CyclicLR"]


def _per_group(name: str, optimizer: Optimizer, value) -> list:
    """``value`` for every param group (a list/tuple must have one entry per group)."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"expected {n} values for {name} (one per param group), got "
                             f"{len(value)}")
        return [float(v) for v in value]
    return [float(value)] * n


class _MomentumCycling(LRScheduler):
    """Shared parts: per-group closed form and momentum cycling."""

    def _setup_momentum(self, optimizer: Optimizer, cycle_momentum: bool, base_momentum,
                        max_momentum, last_step: int, initial: str) -> None:
        self.cycle_momentum = cycle_momentum
        if not cycle_momentum:
            return
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError(f"{type(self).__name__}: optimizer must support momentum or beta1 "
                             f"with the cycle_momentum option enabled "
                             f"({type(optimizer).__name__} has neither)")
        self.use_beta1 = "betas" in optimizer.defaults
        self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
        self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
        if last_step == -1:
            for group, b, m in zip(optimizer.param_groups, self.base_momentums,
                                   self.max_momentums):
                self._set_momentum(group, m if initial == "max" else b)
                group["base_momentum"], group["max_momentum"] = b, m

    def _set_momentum(self, group: dict, momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *tuple(group["betas"])[1:])
        else:
            group["momentum"] = momentum

    def _at(self, i: int, step: int) -> tuple[float, float | None]:
        raise NotImplementedError

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or jump to ``epoch``): set every group's lr (and momentum)."""
        self.last_step = self.last_step + 1 if epoch is None else int(epoch)
        lrs = []
        for i, group in enumerate(self.optimizer.param_groups):
            lr, momentum = self._at(i, self.last_step)
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(group, momentum)
        self.update_lrs(lrs)

    def get_lr(self, base_lr: float, step: int) -> float:
        """The learning rate at ``step`` of the group whose base learning rate is ``base_lr``."""
        for i, b in enumerate(self.base_lrs):
            if b == base_lr:
                return self._at(i, step)[0]
        raise ValueError(f"{type(self).__name__}.get_lr: no param group has base learning rate "
                         f"{base_lr} (the groups' are {self.base_lrs})")


def _anneal_cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def _anneal_linear(start: float, end: float, pct: float) -> float:
    return (end - start) * pct + start


class OneCycleLR(_MomentumCycling):
    """The 1cycle policy: the learning rate rises from ``max_lr / div_factor`` to ``max_lr``
    over the first ``pct_start`` of ``total_steps`` (= ``epochs * steps_per_epoch`` if not
    given), then anneals to ``initial_lr / final_div_factor``; ``three_phase`` comes back down
    to the initial rate symmetrically before the final annealing. ``anneal_strategy`` is
    ``"cos"`` or ``"linear"``. The momentum goes from ``max_momentum`` to ``base_momentum`` and
    back. Stepping past ``total_steps`` raises ValueError."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1, verbose: bool = False):
        _check_optimizer(optimizer)
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: expected a positive integer total_steps, got "
                                 f"{total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(v, int) or v <= 0:
                    raise ValueError(f"OneCycleLR: expected a positive integer {name}, got {v}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: you must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not isinstance(pct_start, (int, float)) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected a float between 0 and 1 for pct_start, got "
                             f"{pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        t = self.total_steps
        if three_phase:
            self._phases = [(float(pct_start * t) - 1, "initial_lr", "max_lr", "max", "base"),
                            (float(2 * pct_start * t) - 2, "max_lr", "initial_lr", "base", "max"),
                            (t - 1, "initial_lr", "min_lr", "max", "max")]
        else:
            self._phases = [(float(pct_start * t) - 1, "initial_lr", "max_lr", "max", "base"),
                            (t - 1, "max_lr", "min_lr", "base", "max")]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, m in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.optimizer = optimizer
        self._setup_momentum(optimizer, cycle_momentum, base_momentum, max_momentum,
                             last_epoch, "max")
        super().__init__(optimizer, last_epoch, verbose)

    def _at(self, i: int, step: int) -> tuple[float, float | None]:
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; the specified number of "
                             f"total steps is {self.total_steps}")
        group = self.optimizer.param_groups[i]
        anneal = _anneal_cos if self.anneal_strategy == "cos" else _anneal_linear
        start = 0.0
        for k, (end, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
            if step <= end or k == len(self._phases) - 1:
                pct = (step - start) / (end - start)
                lr = anneal(group[lr_from], group[lr_to], pct)
                momentum = None
                if self.cycle_momentum:
                    ms = {"max": self.max_momentums[i], "base": self.base_momentums[i]}
                    momentum = anneal(ms[m_from], ms[m_to], pct)
                return lr, momentum
            start = end
        raise AssertionError("unreachable")


class CyclicLR(_MomentumCycling):
    """Cyclical learning rate: each cycle rises from ``base_lr`` to ``max_lr`` over
    ``step_size_up`` steps and falls back over ``step_size_down`` (default: as many).
    ``mode`` scales the amplitude: ``"triangular"`` (constant), ``"triangular2"`` (halved every
    cycle), ``"exp_range"`` (``gamma ** step``); or ``scale_fn(x)`` of the cycle number
    (``scale_mode="cycle"``) or of the step (``"iterations"``). With ``cycle_momentum`` the
    momentum moves from ``max_momentum`` to ``base_momentum`` and back."""

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True, base_momentum=0.8,
                 max_momentum=0.9, last_epoch: int = -1, verbose: bool = False):
        _check_optimizer(optimizer)
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for group, lr in zip(optimizer.param_groups, base_lrs):
                group["lr"] = lr
                group["initial_lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        if up <= 0 or down <= 0:
            raise ValueError(f"CyclicLR: step_size_up ({step_size_up}) and step_size_down "
                             f"({step_size_down}) must be positive")
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range' when scale_fn is None, got {mode!r}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got "
                             f"{scale_mode!r}")
        self.mode, self.gamma = mode, float(gamma)
        self._scale_fn_custom = scale_fn
        self.scale_mode = ("cycle" if mode in ("triangular", "triangular2") else "iterations") \
            if scale_fn is None else scale_mode
        self.optimizer = optimizer
        self._setup_momentum(optimizer, cycle_momentum, base_momentum, max_momentum,
                             last_epoch, "max")
        super().__init__(optimizer, last_epoch, verbose)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The amplitude factor of cycle (or step) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def _at(self, i: int, step: int) -> tuple[float, float | None]:
        cycle = math.floor(1 + step / self.total_size)
        x = 1.0 + step / self.total_size - cycle
        if x <= self.step_ratio:
            factor = x / self.step_ratio
        else:
            factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else step)
        base = self.base_lrs[i]
        lr = base + (self.max_lrs[i] - base) * factor * scale
        momentum = None
        if self.cycle_momentum:
            height = (self.max_momentums[i] - self.base_momentums[i]) * factor
            momentum = self.max_momentums[i] - height * scale
        return lr, momentum

    def state_dict(self) -> dict:
        """The state without a custom ``scale_fn`` (a function is not state; pass it again)."""
        state = super().state_dict()
        state.pop("_scale_fn_custom", None)
        return state
