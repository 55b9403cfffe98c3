"""``SyncBatchNorm``: batch normalisation whose statistics cover the whole batch of every
process of the world (data-parallel training, one model replica per process, e.g. under
``DistributedDataParallel``), and ``SyncBatchNorm.convert_sync_batchnorm``.

In training each process sums its local batch per channel; the sums (and the element count,
which may differ between processes) are all-reduced, giving the mean; then the squared
deviations from that mean are summed and all-reduced the same way, giving the (biased)
variance. The two all-reduces are differentiable (the gradient of a sum over processes is the
all-reduced gradient), so autograd yields the gradient of the sum of every process's loss,
as a one-process batch norm over the concatenated batch would. In evaluation, with one
process, or on a global tensor (whose statistics are already logical, over the whole tensor),
it is an ordinary batch norm.
"""
from __future__ import annotations

from actorflow import comm
from actorflow.autograd import no_grad
from actorflow.autograd.function import Function
from actorflow.functional.creation import full
from actorflow.functional.shape import cat
from actorflow.nn.module import Module
from actorflow.nn.modules.normalization import _BatchNorm, _InstanceNorm
from actorflow.process.world import world
from actorflow.tensor import Tensor

__all__ = ["SyncBatchNorm"]


class _AllReduceSum(Function):
    """Sum over all processes; its gradient is the all-reduced output gradient."""

    @staticmethod
    def forward(ctx, t: Tensor) -> Tensor:
        out = t.clone()
        comm.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        g = grad.clone()
        comm.all_reduce(g)
        return g


class SyncBatchNorm(_BatchNorm):
    """Batch norm over ``(N, C, *)`` inputs whose statistics are those of the batch of all
    processes together (see the module docstring); same arguments as ``BatchNorm2d``."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.dim()}D "
                             f"input of shape {tuple(input.shape)})")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if not self.training or world().size == 1 or input.is_global:
            return super().forward(input)
        if self.momentum is None and self.track_running_stats:
            raise ValueError("SyncBatchNorm: momentum=None (a cumulative average) is not "
                             "supported across processes; give a momentum")
        if input.is_lazy:
            raise RuntimeError("SyncBatchNorm: inside nn.Graph give it a global tensor (its "
                               "statistics are then over the whole logical batch); local "
                               "tensors are synchronised only eagerly")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: input of shape {tuple(input.shape)} has "
                             f"{input.shape[1]} channels, expected {self.num_features}")
        return self._synced(input)

    def _synced(self, x: Tensor) -> Tensor:
        c = x.shape[1]
        axes = (0,) + tuple(range(2, x.dim()))
        bshape = (1, c) + (1,) * (x.dim() - 2)
        count = x.numel() // c if c else 0
        local = cat([x.sum(dim=axes), full((1,), float(count), dtype=x.dtype)])
        total = _AllReduceSum.apply(local)
        n = total[c:].detach()
        if float(n.item()) <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel over all "
                             f"processes when training (input shape {tuple(x.shape)})")
        mean = total[:c] / n
        centered = x - mean.reshape(bshape)
        var = _AllReduceSum.apply((centered * centered).sum(dim=axes)) / n
        y = centered * (var + self.eps).rsqrt().reshape(bshape)
        if self.weight is not None:
            y = y * self.weight.reshape(bshape)
        if self.bias is not None:
            y = y + self.bias.reshape(bshape)
        if self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
                m = self.momentum
                unbiased = var.detach() * (n / (n - 1))
                self.running_mean.mul_(1 - m).add_(mean.detach().to(self.running_mean.dtype)
                                                   * m)
                self.running_var.mul_(1 - m).add_(unbiased.to(self.running_var.dtype) * m)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm layer in it (itself included) replaced by a
        ``SyncBatchNorm`` holding the same parameters, buffers and training mode.

        Only the whole world is supported as the group: ``process_group`` must be None."""
        if process_group is not None:
            raise ValueError("SyncBatchNorm.convert_sync_batchnorm: only process_group=None "
                             "(all processes) is supported")
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, (_InstanceNorm, cls)):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, bias=module.bias is not None
                      or not module.affine)
            if module.affine:
                with no_grad():
                    out.weight = module.weight
                    if module.bias is not None:
                        out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.train(module.training)
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child))
        return out
