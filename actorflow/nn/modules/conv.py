"""Convolution layers: Conv1d, Conv2d, Conv3d."""
from __future__ import annotations

import math

from actorflow.functional.creation import empty
from actorflow.nn import functional as F
from actorflow.nn import init
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.ops.creation import as_size_int
from actorflow.tensor import Tensor

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n: int, what: str) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"Conv{n}d: {what} needs {n} values, got {tuple(value)}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


class _ConvNd(Module):
    """Shared constructor, initialisation and repr of the N-d convolutions."""

    _n = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:
        super().__init__()
        n, name = self._n, type(self).__name__
        in_channels = as_size_int(name, "in_channels", in_channels)
        out_channels = as_size_int(name, "out_channels", out_channels)
        groups = as_size_int(name, "groups", groups)
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size")
        self.stride = _ntuple(stride, n, "stride")
        self.dilation = _ntuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one "
                                 f"of 'valid', 'same'")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, n, "padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = (0,) * n
        self.transposed = False
        self.weight = Parameter(empty((out_channels, in_channels // groups) + self.kernel_size,
                                      dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Kaiming-uniform weight (a=sqrt(5)); bias uniform in ±1/sqrt(fan_in)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _pad_for_mode(self) -> tuple:
        """``F.pad`` widths (last dim first) for a non-zero padding mode."""
        if self.padding == "valid":
            return (0, 0) * self._n
        widths = []
        for i in reversed(range(self._n)):
            if self.padding == "same":
                total = self.dilation[i] * (self.kernel_size[i] - 1)
                widths += [total // 2, total - total // 2]
            else:
                widths += [self.padding[i], self.padding[i]]
        return tuple(widths)

    def _conv_forward(self, input: Tensor, conv, weight: Tensor | None = None) -> Tensor:
        """``conv`` of ``input`` with this module's settings and ``weight`` (default: its
        own; QAT convolutions pass the fake-quantized one)."""
        weight = self.weight if weight is None else weight
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._pad_for_mode(), mode=self.padding_mode)
            return conv(padded, weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if isinstance(self.padding, str) or any(p != 0 for p in self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-d convolution over ``(N, C_in, L)`` inputs."""

    _n = 1

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, F.conv1d)


class Conv2d(_ConvNd):
    """2-d convolution over ``(N, C_in, H, W)`` inputs."""

    _n = 2

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, F.conv2d)


class Conv3d(_ConvNd):
    """3-d convolution over ``(N, C_in, D, H, W)`` inputs."""

    _n = 3

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """Shared constructor of the transposed convolutions: weight (C_in, C_out/groups, *k)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported, got "
                             f"{padding_mode!r}")
        if isinstance(padding, str):
            raise ValueError(f"{name}: padding must be an int or a tuple, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)
        self.output_padding = _ntuple(output_padding, self._n, "output_padding")
        self.transposed = True
        self.weight = Parameter(empty((in_channels, out_channels // groups) + self.kernel_size,
                                      dtype=dtype, device=device))
        self.reset_parameters()

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(input, output_size)
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._n - 1]
        return fn(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                  self.groups, self.dilation)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        size = tuple(int(s) for s in output_size)[-self._n:]
        spatial = tuple(input.shape[-self._n:])
        pads = []
        for i in range(self._n):
            least = ((spatial[i] - 1) * self.stride[i] - 2 * self.padding[i]
                     + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = size[i] - least
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(f"{type(self).__name__}: requested output size {size} is not "
                                 f"reachable from input size {spatial}")
            pads.append(extra)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over ``(N, C_in, L)`` inputs."""

    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over ``(N, C_in, H, W)`` inputs."""

    _n = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution over ``(N, C_in, D, H, W)`` inputs."""

    _n = 3
