"""Adaptive max pooling and max unpooling, ``torch.nn.functional`` signatures.

adaptive_max_pool1d/2d/3d run the ``adaptive_max_pool{n}d`` op; max_unpool1d/2d/3d are a
scatter of the values to their flat indices (the inverse of ``max_pool`` with
``return_indices=True``), a composite whose gradient is the matching gather.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.framework.sbp_parallel import broadcast
from actorflow.functional.conv import ntuple
from actorflow.functional.pool import _batched, _unbatch
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.tensor import Tensor

_ADAPTIVE_MAX = {n: registry.get(f"adaptive_max_pool{n}d") for n in (1, 2, 3)}


def _adaptive_max(n: int, input, output_size, return_indices: bool):
    name = f"adaptive_max_pool{n}d"
    x, added = _batched(name, input, n)
    if isinstance(output_size, (tuple, list)):
        if len(output_size) == 1:
            output_size = tuple(output_size) * n
        if len(output_size) != n:
            raise ValueError(f"{name}: output_size needs {n} values, got {tuple(output_size)}")
        size = tuple(x._shape[2 + i] if s is None else int(s) for i, s in enumerate(output_size))
    else:
        size = (int(output_size),) * n
    values, indices = apply(_ADAPTIVE_MAX[n], [x], {"output_size": size})
    values, indices = _unbatch(values, added), _unbatch(indices, added)
    return (values, indices) if return_indices else values


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, L) to ``output_size`` positions (indices: argmax positions)."""
    return _adaptive_max(1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, H, W) to ``output_size`` (an int or a pair; None keeps a dim)."""
    return _adaptive_max(2, input, output_size, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max pooling of (N, C, D, H, W) to ``output_size``."""
    return _adaptive_max(3, input, output_size, return_indices)


def _max_unpool(n: int, input, indices, kernel_size, stride, padding, output_size) -> Tensor:
    from actorflow.functional.creation import zeros
    from actorflow.functional.index import scatter

    name = f"max_unpool{n}d"
    x, added = _batched(name, input, n)
    idx, _ = _batched(name, indices, n)
    if tuple(idx._shape) != tuple(x._shape):
        raise ValueError(f"{name}: indices shape {tuple(indices._shape)} must match the input "
                         f"shape {tuple(input._shape)}")
    kernel = ntuple(kernel_size, n, "kernel_size", name)
    stride = kernel if stride is None else ntuple(stride, n, "stride", name)
    pad = ntuple(padding, n, "padding", name)
    default = tuple((i - 1) * s - 2 * p + k for i, s, p, k in zip(x._shape[2:], stride, pad,
                                                                  kernel))
    if output_size is None:
        size = default
    else:
        size = tuple(int(s) for s in output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"{name}: output_size needs {n} spatial values, got "
                             f"{tuple(output_size)}")
        for s, d, st in zip(size, default, stride):
            if not d - st < s < d + st:
                raise ValueError(f"{name}: invalid output_size {tuple(output_size)} (it must "
                                 f"lie between {tuple(a - b for a, b in zip(default, stride))} "
                                 f"and {tuple(a + b for a, b in zip(default, stride))}, "
                                 f"exclusive)")
    N, C = x._shape[:2]
    plane = 1
    for s in size:
        plane *= s
    # a global input scatters into a global zero output on its placement (broadcast: the
    # scatter's SBP rule lays it out)
    glob = {"placement": x.placement, "sbp": (broadcast,) * len(x.sbp)} if x.is_global else {}
    out = scatter(zeros((N, C, plane), dtype=x.dtype, **glob), 2, reshape(idx, (N, C, -1)),
                  reshape(x, (N, C, -1)))
    return _unbatch(reshape(out, (N, C) + size), added)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Place each value of (N, C, L) at its ``indices`` position of a zero output."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Place each value of (N, C, H, W) at its flat ``indices`` position of a zero output."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Place each value of (N, C, D, H, W) at its flat ``indices`` position of a zero output."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


__all__ = ["adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d"]
