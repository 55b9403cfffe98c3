"""Pooling functional API with ``torch.nn.functional`` signatures.

max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d. Inputs are batched
``(N, C, *spatial)`` or unbatched ``(C, *spatial)``. ``max_pool_grad``, ``avg_pool_nd``,
``avg_pool_grad``, ``adaptive_avg_pool_nd`` and ``adaptive_avg_pool_grad`` serve the gradient
rules.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.conv import ntuple
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.tensor import Tensor

_DIMS = (1, 2, 3)
_MAX = {n: registry.get(f"max_pool{n}d") for n in _DIMS}
_MAX_GRAD = {n: registry.get(f"max_pool{n}d_grad") for n in _DIMS}
_AVG = {n: registry.get(f"avg_pool{n}d") for n in _DIMS}
_AVG_GRAD = {n: registry.get(f"avg_pool{n}d_grad") for n in _DIMS}
_ADAPTIVE = {n: registry.get(f"adaptive_avg_pool{n}d") for n in _DIMS}
_ADAPTIVE_GRAD = {n: registry.get(f"adaptive_avg_pool{n}d_grad") for n in _DIMS}


def _batched(name: str, x, n: int):
    """``x`` with a batch dim (added for unbatched input) and whether one was added."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if len(x._shape) == n + 1:
        return reshape(x, (1,) + tuple(x._shape)), True
    if len(x._shape) != n + 2:
        raise ValueError(f"{name}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(x._shape)}")
    return x, False


def _unbatch(t: Tensor, added: bool) -> Tensor:
    return reshape(t, tuple(t._shape[1:])) if added else t


def _window_attrs(name, n, kernel_size, stride, padding, ceil_mode) -> dict:
    kernel = ntuple(kernel_size, n, "kernel_size", name)
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        stride = kernel
    return {"kernel_size": kernel, "stride": ntuple(stride, n, "stride", name),
            "padding": ntuple(padding, n, "padding", name), "ceil_mode": bool(ceil_mode)}


def _max_pool(n, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    name = f"max_pool{n}d"
    x, added = _batched(name, input, n)
    attrs = _window_attrs(name, n, kernel_size, stride, padding, ceil_mode)
    attrs["dilation"] = ntuple(dilation, n, "dilation", name)
    values, indices = apply(_MAX[n], [x], attrs)
    values, indices = _unbatch(values, added), _unbatch(indices, added)
    return (values, indices) if return_indices else values


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """1-d max pooling over (N, C, L); ``return_indices`` also returns the argmax positions."""
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """2-d max pooling over (N, C, H, W); indices are flat positions in each H*W plane."""
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """3-d max pooling over (N, C, D, H, W)."""
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool(n, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    name = f"avg_pool{n}d"
    x, added = _batched(name, input, n)
    attrs = _window_attrs(name, n, kernel_size, stride, padding, ceil_mode)
    attrs["count_include_pad"] = bool(count_include_pad)
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ValueError(f"{name}: divisor_override must be positive, got {divisor_override}")
    attrs["divisor_override"] = None if divisor_override is None else int(divisor_override)
    return _unbatch(apply(_AVG[n], [x], attrs)[0], added)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-d average pooling over (N, C, L)."""
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-d average pooling over (N, C, H, W)."""
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-d average pooling over (N, C, D, H, W)."""
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _adaptive(n, input, output_size) -> Tensor:
    name = f"adaptive_avg_pool{n}d"
    x, added = _batched(name, input, n)
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != n:
            raise ValueError(f"{name}: output_size needs {n} values, got {tuple(output_size)}")
        size = tuple(x._shape[2 + i] if s is None else int(s) for i, s in enumerate(output_size))
    else:
        size = (int(output_size),) * n
    return _unbatch(adaptive_avg_pool_nd(x, size), added)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, L) to ``output_size`` positions."""
    return _adaptive(1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, H, W) to ``output_size`` (an int or a pair; None keeps a dim)."""
    return _adaptive(2, input, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average pooling of (N, C, D, H, W) to ``output_size``."""
    return _adaptive(3, input, output_size)


# ---- used by gradient rules -------------------------------------------------------------------

def max_pool_grad(dout: Tensor, indices: Tensor, input_shape, x: Tensor | None = None,
                  disjoint: bool = False) -> Tensor:
    """Scatter ``dout`` to the argmax ``indices`` of a max pooling of an ``input_shape`` input
    (``x``, the pooled input, if given, links the result to it in the graph). ``disjoint``:
    the windows do not overlap, so no two indices of a plane are equal (a plain scatter)."""
    n = len(input_shape) - 2
    ins = [dout, indices] if x is None else [dout, indices, x]
    attrs = {"input_shape": tuple(input_shape)}
    if disjoint:
        attrs["disjoint"] = True
    return apply(_MAX_GRAD[n], ins, attrs)[0]


def avg_pool_nd(x: Tensor, attrs: dict) -> Tensor:
    """Average pooling with the op's normalised attrs (n = len(kernel_size))."""
    return apply(_AVG[len(attrs["kernel_size"])], [x], dict(attrs))[0]


def avg_pool_grad(dout: Tensor, input_shape, attrs: dict, x: Tensor | None = None) -> Tensor:
    """Gradient of average pooling with ``attrs`` for an input of ``input_shape`` (``x`` as in
    ``max_pool_grad``)."""
    a = dict(attrs, input_shape=tuple(input_shape))
    ins = [dout] if x is None else [dout, x]
    return apply(_AVG_GRAD[len(attrs["kernel_size"])], ins, a)[0]


def adaptive_avg_pool_nd(x: Tensor, output_size: tuple) -> Tensor:
    """Adaptive average pooling of a batched input to an explicit ``output_size`` tuple."""
    n = len(output_size)
    return apply(_ADAPTIVE[n], [x], {"output_size": tuple(output_size)})[0]


def adaptive_avg_pool_grad(dout: Tensor, input_shape, x: Tensor | None = None) -> Tensor:
    """Gradient of adaptive average pooling for an input of ``input_shape`` (``x`` as in
    ``max_pool_grad``)."""
    n = len(input_shape) - 2
    ins = [dout] if x is None else [dout, x]
    return apply(_ADAPTIVE_GRAD[n], ins, {"input_shape": tuple(input_shape)})[0]


__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "max_pool_grad",
           "avg_pool_nd", "avg_pool_grad", "adaptive_avg_pool_nd", "adaptive_avg_pool_grad"]
