"""Stochastic weight averaging (``oneflow.optim.swa_utils``, as PyTorch's):
``AveragedModel`` keeps a running average of a model's parameters, ``SWALR`` anneals each
param group's learning rate to a fixed SWA learning rate, ``update_bn`` recomputes batch-norm
statistics for the averaged weights with one pass over the data."""
from __future__ import annotations

import copy
import itertools
import math
from typing import Callable

from actorflow.autograd import no_grad
from actorflow.framework import dtype as dt
from actorflow.functional.creation import ones_like, tensor, zeros_like
from actorflow.nn.module import Module
from actorflow.nn.modules.batchnorm import _BatchNorm
from actorflow.optim.lr_scheduler import LRScheduler
from actorflow.optim.optimizer import Optimizer

__all__ = ["AveragedModel", "SWALR", "update_bn"]


def _mean_of_all(p_avg, p, n_averaged):
    """The running equal-weight average after one more model: ``p_avg + (p - p_avg)/(n+1)``."""
    return p_avg + (p - p_avg) / (n_averaged + 1)


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers with ``use_buffers``) are the
    average, by ``avg_fn(p_avg, p, n_averaged)``, of the models passed to
    ``update_parameters``; ``n_averaged`` counts them."""

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 use_buffers: bool = False) -> None:
        super().__init__()
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.int64, device=device))
        self.avg_fn = _mean_of_all if avg_fn is None else avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tracked(self, model: Module):
        if self.use_buffers:
            return itertools.chain(model.parameters(), model.buffers())
        return model.parameters()

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters into the average."""
        first = int(self.n_averaged) == 0
        with no_grad():
            for p_avg, p in zip(self._tracked(self.module), self._tracked(model)):
                src = p.detach().to(p_avg.device)
                if first:
                    p_avg.detach().copy_(src)
                else:
                    new = self.avg_fn(p_avg.detach(), src, self.n_averaged.to(p_avg.device))
                    p_avg.detach().copy_(new)
            if not self.use_buffers:  # buffers follow the source model
                for b_avg, b in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b.detach().to(b_avg.device))
            self.n_averaged.add_(1)


def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the running statistics of every batch norm of ``model`` as the plain average
    over one pass of ``loader`` (a batch, or a list/tuple whose first item is the input)."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean = zeros_like(m.running_mean)
            m.running_var = ones_like(m.running_var)
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
        m.num_batches_tracked.mul_(0)
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


def _cosine_anneal(t: float) -> float:
    return (1 - math.cos(math.pi * t)) / 2


def _linear_anneal(t: float) -> float:
    return t


class SWALR(LRScheduler):
    """Anneal each group's learning rate from its value to ``swa_lr`` over ``anneal_epochs``
    steps (``"cos"`` or ``"linear"``), then hold it there."""

    def __init__(self, optimizer: Optimizer, swa_lr, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_step: int = -1) -> None:
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(f"SWALR: swa_lr must have the same length as "
                                 f"optimizer.param_groups ({len(groups)}), got {len(swa_lr)}")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"SWALR: anneal_strategy must be one of 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self.anneal_func = _cosine_anneal if anneal_strategy == "cos" else _linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs!r}")
        self.anneal_epochs = anneal_epochs
        self._step_count = 0
        super().__init__(optimizer, last_step)

    @staticmethod
    def _lr_before(lr: float, swa_lr: float, alpha: float) -> float:
        """The learning rate ``lr`` annealed from, given it is ``alpha`` of the way."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def step(self, epoch: int | None = None) -> None:
        """Move one step further along the annealing (``epoch`` sets ``last_step`` only)."""
        self._step_count += 1
        self.last_step = self.last_step + 1 if epoch is None else int(epoch)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0.0, min(1.0, (step - 1) / span)))
        alpha = self.anneal_func(max(0.0, min(1.0, step / span)))
        lrs = []
        for group in self.optimizer.param_groups:
            prev = self._lr_before(group["lr"], group["swa_lr"], prev_alpha)
            lrs.append(group["swa_lr"] * alpha + prev * (1 - alpha))
        self.update_lrs(lrs)
