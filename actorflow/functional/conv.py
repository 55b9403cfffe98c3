"""Convolution functional API with ``torch.nn.functional`` signatures: conv1d, conv2d, conv3d.

``conv_nd``, ``conv_grad_input`` and ``conv_grad_weight`` take normalised attrs (padding as
``(low, high)`` pairs); gradient rules use them.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.tensor import Tensor

_CONV = {n: registry.get(f"conv{n}d") for n in (1, 2, 3)}
_GRAD_INPUT = {n: registry.get(f"conv{n}d_grad_input") for n in (1, 2, 3)}
_GRAD_WEIGHT = {n: registry.get(f"conv{n}d_grad_weight") for n in (1, 2, 3)}


def ntuple(value, n: int, what: str, name: str) -> tuple:
    """``value`` (an int or a sequence of 1 or ``n`` ints) as an n-tuple of ints."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            value = tuple(value) * n
        if len(value) != n:
            raise ValueError(f"{name}: {what} needs {n} values, got {tuple(value)}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def _pads(padding, kernel: tuple, stride: tuple, dilation: tuple, n: int, name: str) -> tuple:
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride={stride})")
            pairs = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pairs.append((total // 2, total - total // 2))
            return tuple(pairs)
        raise ValueError(f"{name}: invalid padding string {padding!r}; expected 'same' or "
                         f"'valid'")
    return tuple((p, p) for p in ntuple(padding, n, "padding", name))


def check_conv_args(name: str, n: int, input, weight) -> None:
    """Raise unless ``input`` and ``weight`` are tensors and the weight has ``n + 2`` dims."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError(f"{name}: input and weight must be Tensors, got "
                        f"{type(input).__name__} and {type(weight).__name__}")
    if len(weight._shape) != n + 2:
        raise ValueError(f"{name}: expected a {n + 2}-d weight, got shape "
                         f"{tuple(weight._shape)}")


def _conv(n: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    name = f"conv{n}d"
    check_conv_args(name, n, input, weight)
    stride = ntuple(stride, n, "stride", name)
    dilation = ntuple(dilation, n, "dilation", name)
    pads = _pads(padding, tuple(weight._shape[2:]), stride, dilation, n, name)
    unbatched = len(input._shape) == n + 1
    if unbatched:
        input = reshape(input, (1,) + tuple(input._shape))
    out = conv_nd(input, weight, bias, stride, pads, dilation, int(groups))
    return reshape(out, tuple(out._shape[1:])) if unbatched else out


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-d convolution of ``input`` (N, C_in, L) with ``weight`` (C_out, C_in/groups, k)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-d convolution of ``input`` (N, C_in, H, W) with ``weight`` (C_out, C_in/groups, kH, kW).

    ``padding`` is an int, a pair, ``'valid'`` or ``'same'`` (stride 1 only)."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-d convolution of ``input`` (N, C_in, D, H, W) with a 5-d ``weight``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _attrs(stride, padding, dilation, groups, **extra) -> dict:
    attrs = {"stride": tuple(stride), "padding": tuple(tuple(p) for p in padding),
             "dilation": tuple(dilation), "groups": int(groups)}
    attrs.update(extra)
    return attrs


def conv_nd(input: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple, padding: tuple,
            dilation: tuple, groups: int) -> Tensor:
    """Convolution with normalised attrs (``padding`` as (low, high) pairs per spatial dim)."""
    op = _CONV.get(len(stride))
    if op is None:
        raise ValueError(f"conv: {len(stride)} spatial dims are not supported (1, 2 or 3)")
    ins = [input, weight] if bias is None else [input, weight, bias]
    return apply(op, ins, _attrs(stride, padding, dilation, groups))[0]


def conv_grad_input(dout: Tensor, weight: Tensor, input_shape, stride: tuple, padding: tuple,
                    dilation: tuple, groups: int) -> Tensor:
    """Gradient of a convolution with respect to its input (of shape ``input_shape``)."""
    attrs = _attrs(stride, padding, dilation, groups, input_shape=tuple(input_shape))
    return apply(_GRAD_INPUT[len(stride)], [dout, weight], attrs)[0]


def conv_grad_weight(input: Tensor, dout: Tensor, weight_shape, stride: tuple, padding: tuple,
                     dilation: tuple, groups: int) -> Tensor:
    """Gradient of a convolution with respect to its weight (of shape ``weight_shape``)."""
    attrs = _attrs(stride, padding, dilation, groups, weight_shape=tuple(weight_shape))
    return apply(_GRAD_WEIGHT[len(stride)], [input, dout], attrs)[0]


__all__ = ["conv1d", "conv2d", "conv3d", "conv_nd", "conv_grad_input", "conv_grad_weight"]
