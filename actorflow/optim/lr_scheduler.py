"""Learning-rate schedulers (``actorflow.optim.lr_scheduler``).

Each scheduler is a closed form ``get_lr(base_lr, step) -> lr`` (OneFlow's design): ``step()``
advances ``last_step`` and sets every param group's ``lr`` to ``get_lr(initial_lr, last_step)``.
Closed forms make schedulers composable (``SequentialLR``, ``ChainedScheduler``, ``WarmupLR``)
and let ``nn.Graph`` compute the learning rate of any iteration. ``last_epoch`` is an alias of
``last_step`` (PyTorch's name). A scheduler's constructor performs step 0.
"""
from __future__ import annotations

import bisect
import math
import types

from actorflow.optim.optimizer import Optimizer


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


class LRScheduler:
    """Base class: keeps ``base_lrs`` (each group's ``initial_lr``), ``last_step`` and the last
    learning rates; subclasses define ``get_lr(base_lr, step)``."""

    def __init__(self, optimizer: Optimizer, last_step: int = -1, verbose: bool = False):
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        self.last_step = last_step
        self.verbose = verbose
        self._init_base_lrs()
        self.step()

    def _init_base_lrs(self) -> None:
        for i, group in enumerate(self.optimizer.param_groups):
            if self.last_step == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when "
                               f"resuming a scheduler (last_step={self.last_step})")
        self.base_lrs = [group["initial_lr"] for group in self.optimizer.param_groups]

    @property
    def last_epoch(self) -> int:
        return self.last_step

    @last_epoch.setter
    def last_epoch(self, value: int) -> None:
        self.last_step = value

    def get_lr(self, base_lr: float, step: int) -> float:
        """The learning rate at ``step`` for a group whose initial learning rate is ``base_lr``."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per param group."""
        return list(self._last_lr)

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or jump to step ``epoch``) and set the groups' learning rates."""
        self.last_step = self.last_step + 1 if epoch is None else int(epoch)
        self.update_lrs([self.get_lr(b, self.last_step) for b in self.base_lrs])

    def update_lrs(self, lrs: list) -> None:
        self._last_lr = []
        for i, (group, lr) in enumerate(zip(self.optimizer.param_groups, lrs)):
            group["lr"] = lr
            self._last_lr.append(lr)
            if self.verbose:
                self.print_lr(i, lr)

    def print_lr(self, group: int, lr: float) -> None:
        print(f"Last step {self.last_step} of {type(self).__name__} adjusting learning rate of "
              f"param_groups[{group}] to {lr:.5f}")

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler


class StepLR(LRScheduler):
    """``base_lr * gamma ** (step // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_step: int = -1, verbose: bool = False):
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        return base_lr * self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """``base_lr * gamma ** (number of milestones <= step)``."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1,
                 last_step: int = -1, verbose: bool = False):
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, step)


class ExponentialLR(LRScheduler):
    """``base_lr * gamma ** step``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_step: int = -1,
                 verbose: bool = False):
        self.gamma = gamma
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        return base_lr * self.gamma ** step


class CosineAnnealingLR(LRScheduler):
    """``eta_min + (base_lr - eta_min) * (1 + cos(pi * step / T_max)) / 2`` (periodic past
    ``T_max``, as PyTorch's recursive form)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_step: int = -1, verbose: bool = False):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        return self.eta_min + (base_lr - self.eta_min) * 0.5 * (
            1.0 + math.cos(math.pi * step / self.T_max))


class CosineDecayLR(LRScheduler):
    """OneFlow: ``base_lr * ((1 - alpha) * (1 + cos(pi * step / decay_steps)) / 2 + alpha)``
    before ``decay_steps``, ``base_lr * alpha`` from then on."""

    def __init__(self, optimizer: Optimizer, decay_steps: int, alpha: float = 0.0,
                 last_step: int = -1, verbose: bool = False):
        if decay_steps <= 0:
            raise ValueError(f"CosineDecayLR: decay_steps must be positive, got {decay_steps}")
        self.decay_steps, self.alpha = decay_steps, alpha
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        if step >= self.decay_steps:
            return base_lr * self.alpha
        cos_decay = 0.5 * (1.0 + math.cos(math.pi * step / self.decay_steps))
        return base_lr * ((1.0 - self.alpha) * cos_decay + self.alpha)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every ``T_i`` steps (``T_0``, then times ``T_mult``); OneFlow
    extras: the peak decays by ``decay_rate`` per restart and after ``restart_limit`` restarts
    (0: never) the rate stays at ``eta_min``."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 decay_rate: float = 1.0, restart_limit: int = 0, last_step: int = -1,
                 verbose: bool = False):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_mult, self.eta_min = T_0, T_mult, eta_min
        self.decay_rate, self.restart_limit = decay_rate, restart_limit
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        if self.T_mult == 1:
            cycle, t, period = step // self.T_0, step % self.T_0, self.T_0
        else:
            cycle, t, period = 0, step, self.T_0
            while t >= period:
                t -= period
                period *= self.T_mult
                cycle += 1
        if self.restart_limit > 0 and cycle >= self.restart_limit:
            return self.eta_min
        peak = base_lr * self.decay_rate ** cycle
        return self.eta_min + (peak - self.eta_min) * 0.5 * (1.0 + math.cos(math.pi * t / period))


class PolynomialLR(LRScheduler):
    """OneFlow: ``(base_lr - end_learning_rate) * (1 - s / decay_batch) ** power +
    end_learning_rate`` with ``s = min(step, decay_batch)``; with ``cycle`` the decay restarts:
    ``decay_batch`` grows to the next multiple of itself past ``step``. ``total_iters`` is
    PyTorch's name for ``decay_batch`` (PyTorch decays to 0: pass ``end_learning_rate=0``)."""

    def __init__(self, optimizer: Optimizer, decay_batch: int | None = None,
                 end_learning_rate: float = 0.0001, power: float = 1.0, cycle: bool = False,
                 last_step: int = -1, verbose: bool = False, total_iters: int | None = None):
        if decay_batch is None:
            decay_batch = 5 if total_iters is None else total_iters
        if decay_batch <= 0:
            raise ValueError(f"PolynomialLR: decay_batch must be positive, got {decay_batch}")
        self.max_decay_steps, self.end_learning_rate = decay_batch, end_learning_rate
        self.power, self.cycle = power, cycle
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        decay = self.max_decay_steps
        if self.cycle:
            step = max(step, 1)  # as OneFlow: step 0 of a cycling decay uses step 1
            decay = decay * math.ceil(step / decay)
        else:
            step = min(step, decay)
        factor = (1.0 - step / decay) ** self.power
        return (base_lr - self.end_learning_rate) * factor + self.end_learning_rate


class LinearLR(LRScheduler):
    """The factor goes linearly from ``start_factor`` to ``end_factor`` over ``total_iters``
    steps, then stays: ``base_lr * factor``."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_step: int = -1,
                 verbose: bool = False):
        if not 0.0 <= start_factor <= 1.0:
            raise ValueError("Starting multiplicative factor expected to be between 0 and 1.")
        if not 0.0 <= end_factor <= 1.0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        if step >= self.total_iters:
            return base_lr * self.end_factor
        return base_lr * (self.start_factor
                          + (self.end_factor - self.start_factor) * step / self.total_iters)


class ConstantLR(LRScheduler):
    """``base_lr * factor`` for the first ``total_iters`` steps, ``base_lr`` after."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_step: int = -1, verbose: bool = False):
        if not 0.0 <= factor <= 1.0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_step, verbose)

    def get_lr(self, base_lr: float, step: int) -> float:
        return base_lr * self.factor if step < self.total_iters else base_lr


def _lambdas(optimizer: Optimizer, lr_lambda, name: str) -> list:
    n = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != n:
            raise ValueError(f"{name}: expected {n} lr_lambdas, got {len(lr_lambda)}")
        return list(lr_lambda)
    return [lr_lambda] * n


class _LambdaState(LRScheduler):
    """Shared state-dict handling: plain functions are not saved, callable objects save their
    ``__dict__`` (as PyTorch)."""

    def state_dict(self) -> dict:
        sd = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        sd["lr_lambdas"] = [None if _is_plain_function(f) else dict(f.__dict__)
                            for f in self.lr_lambdas]
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        self.__dict__.update(state_dict)
        for f, s in zip(self.lr_lambdas, saved):
            if s is not None:
                f.__dict__.update(s)


def _is_plain_function(f) -> bool:
    return isinstance(f, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)) \
        or not hasattr(f, "__dict__")


class LambdaLR(_LambdaState):
    """``base_lr * lr_lambda(step)`` (one function, or one per param group)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_step: int = -1,
                 verbose: bool = False):
        _check_optimizer(optimizer)
        self.lr_lambdas = _lambdas(optimizer, lr_lambda, "LambdaLR")
        super().__init__(optimizer, last_step, verbose)

    def step(self, epoch: int | None = None) -> None:
        self.last_step = self.last_step + 1 if epoch is None else int(epoch)
        self.update_lrs([b * f(self.last_step) for f, b in zip(self.lr_lambdas, self.base_lrs)])

    def get_lr(self, base_lr: float, step: int) -> float:
        return base_lr * self.lr_lambdas[0](step)


class MultiplicativeLR(_LambdaState):
    """Each step multiplies the current learning rate by ``lr_lambda(step)`` (from step 1)."""

    def __init__(self, optimizer: Optimizer, lr_lambda, last_step: int = -1,
                 verbose: bool = False):
        _check_optimizer(optimizer)
        self.lr_lambdas = _lambdas(optimizer, lr_lambda, "MultiplicativeLR")
        super().__init__(optimizer, last_step, verbose)

    def step(self, epoch: int | None = None) -> None:
        if epoch is not None:
            self.last_step = int(epoch)
            self.update_lrs([self._closed(f, b, self.last_step)
                             for f, b in zip(self.lr_lambdas, self.base_lrs)])
            return
        self.last_step += 1
        groups = self.optimizer.param_groups
        if self.last_step > 0:
            self.update_lrs([g["lr"] * f(self.last_step) for f, g in zip(self.lr_lambdas, groups)])
        else:
            self.update_lrs([g["lr"] for g in groups])

    @staticmethod
    def _closed(f, base_lr: float, step: int) -> float:
        lr = base_lr
        for s in range(1, step + 1):
            lr *= f(s)
        return lr

    def get_lr(self, base_lr: float, step: int) -> float:
        return self._closed(self.lr_lambdas[0], base_lr, step)


def _nested_state(scheduler) -> dict:
    sd = {k: v for k, v in scheduler.__dict__.items() if k not in ("optimizer", "schedulers")}
    sd["schedulers"] = [s.state_dict() for s in scheduler.schedulers]
    return sd


def _load_nested(scheduler, state_dict: dict) -> None:
    state_dict = dict(state_dict)
    states = state_dict.pop("schedulers")
    scheduler.__dict__.update(state_dict)
    for s, st in zip(scheduler.schedulers, states):
        s.load_state_dict(st)


class SequentialLR(LRScheduler):
    """Runs ``schedulers[i]`` between ``milestones[i-1]`` and ``milestones[i]``. With
    ``interval_rescaling`` (per milestone, or one bool) the scheduler that starts at a milestone
    counts its steps from 0 there (PyTorch's behaviour); otherwise all share the global step
    (OneFlow's default)."""

    def __init__(self, optimizer: Optimizer, schedulers, milestones, interval_rescaling=False,
                 last_step: int = -1, verbose: bool = False):
        _check_optimizer(optimizer)
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR expects all schedulers to belong to the same "
                                 f"optimizer, but scheduler {i} has a different one")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects one milestone fewer than schedulers, got "
                             f"{len(schedulers)} schedulers and {len(milestones)} milestones")
        if isinstance(interval_rescaling, bool):
            interval_rescaling = [interval_rescaling] * len(milestones)
        interval_rescaling = [bool(r) for r in interval_rescaling]
        if len(interval_rescaling) != len(milestones):
            raise ValueError(f"SequentialLR: interval_rescaling has {len(interval_rescaling)} "
                             f"entries for {len(milestones)} milestones")
        self.schedulers, self.milestones = schedulers, milestones
        self.interval_rescaling = interval_rescaling
        super().__init__(optimizer, last_step, verbose)

    def _local(self, step: int):
        i = bisect.bisect_right(self.milestones, step)
        if i > 0 and self.interval_rescaling[i - 1]:
            step -= self.milestones[i - 1]
        return self.schedulers[i], step

    def step(self, epoch: int | None = None) -> None:
        self.last_step = self.last_step + 1 if epoch is None else int(epoch)
        scheduler, step = self._local(self.last_step)
        scheduler.last_step = step
        self.update_lrs([scheduler.get_lr(b, step) for b in self.base_lrs])

    def get_lr(self, base_lr: float, step: int) -> float:
        scheduler, local = self._local(step)
        return scheduler.get_lr(base_lr, local)

    def state_dict(self) -> dict:
        return _nested_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_nested(self, state_dict)


class ChainedScheduler(LRScheduler):
    """Applies every scheduler in turn at each step: ``lr = s_n.get_lr(... s_1.get_lr(base))``
    (multiplicative schedulers compose as products)."""

    def __init__(self, schedulers, optimizer: Optimizer | None = None):
        schedulers = list(schedulers)
        if not schedulers or not all(isinstance(s, LRScheduler) for s in schedulers):
            raise ValueError("ChainedScheduler expects a non-empty list of schedulers")
        opt = schedulers[0].optimizer if optimizer is None else optimizer
        for i, s in enumerate(schedulers):
            if s.optimizer is not opt:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the same "
                                 f"optimizer, but scheduler {i} has a different one")
        self.schedulers = schedulers
        super().__init__(opt)

    def get_lr(self, base_lr: float, step: int) -> float:
        lr = base_lr
        for s in self.schedulers:
            lr = s.get_lr(lr, step)
        return lr

    def step(self, epoch: int | None = None) -> None:
        super().step(epoch)
        for s in self.schedulers:
            s.last_step = self.last_step

    def state_dict(self) -> dict:
        return _nested_state(self)

    def load_state_dict(self, state_dict: dict) -> None:
        _load_nested(self, state_dict)


class WarmupLR(SequentialLR):
    """OneFlow's warmup: wraps an optimizer or a scheduler. For ``warmup_iters`` steps the factor
    is ``warmup_factor`` ("constant") or rises linearly from it ("linear") to where the wrapped
    scheduler is at ``warmup_iters`` (to 1 for a bare optimizer or with ``warmup_prefix``).
    Then the wrapped scheduler runs, on the global step, or restarted at 0 with
    ``warmup_prefix=True``."""

    def __init__(self, scheduler_or_optimizer, warmup_factor: float = 1.0 / 3,
                 warmup_iters: int = 5, warmup_method: str = "linear",
                 warmup_prefix: bool = False, last_step: int = -1, verbose: bool = False):
        if isinstance(scheduler_or_optimizer, LRScheduler):
            scheduler, opt = scheduler_or_optimizer, scheduler_or_optimizer.optimizer
        elif isinstance(scheduler_or_optimizer, Optimizer):
            scheduler, opt = None, scheduler_or_optimizer
        else:
            raise ValueError(f"WarmupLR: 'scheduler_or_optimizer' must be an LRScheduler or an "
                             f"Optimizer, got {type(scheduler_or_optimizer).__name__}")
        if warmup_method not in ("linear", "constant"):
            raise ValueError(f"WarmupLR: warmup_method must be 'linear' or 'constant', got "
                             f"{warmup_method!r}")
        if scheduler is None and warmup_iters <= 0:
            raise ValueError("WarmupLR: warmup_iters must be positive when wrapping an optimizer")
        self.warmup_factor, self.warmup_iters = warmup_factor, warmup_iters
        self.warmup_method, self.warmup_prefix = warmup_method, warmup_prefix
        self.optimizer, self.last_step, self.verbose = opt, last_step, verbose
        self._init_base_lrs()
        schedulers, milestones = [], []
        if warmup_iters > 0:
            schedulers.append(self._warmup(scheduler))
        if scheduler is not None:
            if schedulers:
                milestones.append(warmup_iters)
            schedulers.append(scheduler)
        super().__init__(opt, schedulers, milestones, interval_rescaling=warmup_prefix,
                         last_step=last_step, verbose=verbose)

    def _warmup(self, scheduler) -> LRScheduler:
        kw = dict(last_step=self.last_step, verbose=self.verbose)
        if self.warmup_method == "constant":
            return ConstantLR(self.optimizer, factor=self.warmup_factor,
                              total_iters=self.warmup_iters, **kw)
        end_factor = 1.0
        if scheduler is not None and not self.warmup_prefix:
            base = self.base_lrs[0]
            if any(not math.isclose(b, base) for b in self.base_lrs):
                raise ValueError("WarmupLR: param groups with different learning rates need "
                                 "different warmups (use one optimizer per learning rate)")
            end_factor = scheduler.get_lr(base, self.warmup_iters) / base if base else 1.0
        return LinearLR(self.optimizer, start_factor=self.warmup_factor, end_factor=end_factor,
                        total_iters=self.warmup_iters, **kw)


WarmUpLR = WarmupLR


class ReduceLROnPlateau:
    """Multiply the learning rates by ``factor`` when a metric has stopped improving for
    ``patience`` steps (``step(metric)``); ``cooldown`` steps follow each reduction."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0.0, eps: float = 1e-8, verbose: bool = False):
        _check_optimizer(optimizer)
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau: factor should be < 1.0")
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown")
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"ReduceLROnPlateau: expected {n} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * n
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps, self.verbose = cooldown, eps, verbose
        self.cooldown_counter, self.num_bad_steps, self.last_step = 0, 0, 0
        self.best = math.inf if mode == "min" else -math.inf
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    @property
    def last_epoch(self) -> int:
        return self.last_step

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel"
                        else best - self.threshold)
        return a > (best * (1.0 + self.threshold) if self.threshold_mode == "rel"
                    else best + self.threshold)

    def step(self, metrics) -> None:
        """Record a new value of the monitored metric."""
        current = float(metrics)
        self.last_step += 1
        if self.is_better(current, self.best):
            self.best, self.num_bad_steps = current, 0
        else:
            self.num_bad_steps += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_steps = 0
        if self.num_bad_steps > self.patience:
            self._reduce()
            self.cooldown_counter, self.num_bad_steps = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _reduce(self) -> None:
        for i, group in enumerate(self.optimizer.param_groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new
                if self.verbose:
                    print(f"Step {self.last_step}: reducing learning rate of group {i} to "
                          f"{new:.4e}.")

    def get_last_lr(self) -> list:
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "CosineDecayLR", "CosineAnnealingWarmRestarts", "PolynomialLR", "LinearLR",
           "ConstantLR", "LambdaLR", "MultiplicativeLR", "SequentialLR", "ChainedScheduler",
           "WarmupLR", "WarmUpLR", "ReduceLROnPlateau"]


# last: they subclass LRScheduler
from actorflow.optim.lr_cyclic import CyclicLR, OneCycleLR  # noqa: E402

__all__ += ["CyclicLR", "OneCycleLR"]
