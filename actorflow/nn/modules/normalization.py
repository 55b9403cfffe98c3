"""Normalisation layers: BatchNorm1d/2d/3d, LayerNorm, GroupNorm, InstanceNorm1d/2d/3d,
RMSNorm."""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.autograd import no_grad
from actorflow.framework import dtype as dt
from actorflow.functional.creation import empty, ones, tensor, zeros
from actorflow.nn import functional as F
from actorflow.nn import init
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


def _ones_zeros(weight: Tensor | None, bias: Tensor | None) -> None:
    if weight is not None:
        init.ones_(weight)
    if bias is not None:
        init.zeros_(bias)


class _BatchNorm(Module):
    """Batch normalisation over the channel dim (dim 1), with optional running statistics."""

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(num_features, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to 0, running variance to 1, batch count to 0."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """Running stats to (0, 1); weight to ones and bias to zeros."""
        self.reset_running_stats()
        _ones_zeros(self.weight, self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.dim()}D "
                             f"input of shape {tuple(input.shape)})")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                return self._cumulative_average_forward(input)
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        keep_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep_stats else None,
                            self.running_var if keep_stats else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)

    def _cumulative_average_forward(self, input: Tensor) -> Tensor:
        """momentum=None: the running statistics become the plain average over every batch
        seen. The factor 1 / num_batches_tracked is a tensor op, not a Python number, so this
        also traces into an nn.Graph (where the count has no value until the graph runs)."""
        y = F.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
        with no_grad():
            axes = (0,) + tuple(range(2, input.dim()))
            stat_dtype = self.running_mean.dtype
            f = self.num_batches_tracked.to(stat_dtype).reciprocal()
            mean = input.mean(dim=axes).to(stat_dtype)
            var = input.var(dim=axes, unbiased=True).to(stat_dtype)
            self.running_mean.mul_(1 - f).add_(f * mean)
            self.running_var.mul_(1 - f).add_(f * var)
        return y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` inputs."""

    _dims = (4,)


def _shape_tuple(normalized_shape) -> tuple:
    """``normalized_shape`` (an int or a sequence of ints) as a tuple of ints."""
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalises over the trailing ``normalized_shape`` dims, then scales and shifts."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        _ones_zeros(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalises each of ``num_groups`` channel groups, then scales and shifts per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(empty(num_channels, dtype=dtype, device=device))
            if bias:
                self.bias = Parameter(empty(num_channels, dtype=dtype, device=device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, bias to zeros."""
        _ones_zeros(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` inputs."""

    _dims = (5,)


class _InstanceNorm(_BatchNorm):
    """Normalises each (sample, channel) over its spatial dims; running statistics only with
    ``track_running_stats`` (off by default), affine off by default."""

    _dims: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.dim() == self._dims[0]
        if unbatched:
            input = input.unsqueeze(0)
        use_input_stats = self.training or not self.track_running_stats
        y = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            use_input_stats, 0.1 if self.momentum is None else self.momentum,
                            self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)`` inputs."""

    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _dims = (4, 5)


class RMSNorm(Module):
    """``x / sqrt(mean(x**2 over normalized_shape) + eps) * weight``."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, dtype=dtype, device=device))
            init.ones_(self.weight)
        else:
            self.register_parameter("weight", None)

    def forward(self, input: Tensor) -> Tensor:
        eps = self.eps
        if eps is None:  # PyTorch's default: the machine epsilon of the input's dtype
            eps = float(np.finfo(input.dtype.np).eps) if input.dtype.is_floating_point else 1e-6
        return F.rms_norm(input, self.normalized_shape, self.weight, eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
