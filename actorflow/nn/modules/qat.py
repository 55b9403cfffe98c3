"""Quantization-aware convolutions (OneFlow's ``nn.QatConv1d/2d/3d``): a convolution whose
input and weight pass through fake quantization first.

The input's scale and zero point come from a ``MovingAverageMinMaxObserver`` (momentum
``input_quant_momentum``, updated while training; the module's ``current_train_step`` buffer
stays 0, so with ``stop_update_after_iters=1`` it keeps updating, as OneFlow's does), the
weight's from a ``MinMaxObserver`` (per layer, or per output channel when
``weight_quant_per_layer`` is False). ``FakeQuantization`` passes the gradient straight
through to the input and the weight.
"""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.functional.creation import zeros
from actorflow.nn import functional as F
from actorflow.nn.modules.conv import Conv1d, Conv2d, Conv3d
from actorflow.nn.modules.quantization import (
    FakeQuantization, MinMaxObserver, MovingAverageMinMaxObserver,
)
from actorflow.tensor import Tensor

__all__ = ["QatConv1d", "QatConv2d", "QatConv3d"]


class _QatConv:
    """The fake-quantization parts shared by the QAT convolutions (a mixin before the
    ``ConvNd`` base)."""

    def _init_quant(self, quantization_formula: str, quantization_bit: int,
                    quantization_scheme: str, weight_quant_per_layer: bool,
                    input_quant_momentum: float) -> None:
        if quantization_formula not in ("google", "cambricon"):
            raise ValueError(f"{type(self).__name__}: quantization_formula must be 'google' or "
                             f"'cambricon', got {quantization_formula!r}")
        if quantization_scheme not in ("symmetric", "affine"):
            raise ValueError(f"{type(self).__name__}: quantization_scheme must be 'symmetric' "
                             f"or 'affine', got {quantization_scheme!r}")
        if not 2 <= quantization_bit <= 8:
            raise ValueError(f"{type(self).__name__}: quantization_bit must be in [2, 8], got "
                             f"{quantization_bit}")
        q = dict(quantization_formula=quantization_formula, quantization_bit=quantization_bit,
                 quantization_scheme=quantization_scheme)
        self.channel_pos = "channels_first"
        self.input_min_max_observer = MovingAverageMinMaxObserver(
            stop_update_after_iters=1, momentum=input_quant_momentum, **q)
        self.register_buffer("current_train_step", zeros(1, dtype=dt.int64))
        self.weight_min_max_observer = MinMaxObserver(
            per_layer_quantization=weight_quant_per_layer, **q)
        self.fake_quantizer = FakeQuantization(**q)

    def _fake_quantized(self, x: Tensor) -> tuple:
        """The fake-quantized input and weight."""
        in_scale, in_zero = self.input_min_max_observer(x, self.current_train_step)
        w_scale, w_zero = self.weight_min_max_observer(self.weight)
        return (self.fake_quantizer(x, in_scale, in_zero),
                self.fake_quantizer(self.weight, w_scale, w_zero))


def _qat_conv(base, conv, doc: str):
    class QatConv(_QatConv, base):
        __doc__ = doc

        def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                     padding=0, dilation=1, groups: int = 1, bias: bool = True,
                     padding_mode: str = "zeros", quantization_formula: str = "google",
                     quantization_bit: int = 8, quantization_scheme: str = "symmetric",
                     weight_quant_per_layer: bool = True,
                     input_quant_momentum: float = 0.95) -> None:
            base.__init__(self, in_channels, out_channels, kernel_size, stride, padding,
                          dilation, groups, bias, padding_mode)
            self._init_quant(quantization_formula, quantization_bit, quantization_scheme,
                             weight_quant_per_layer, input_quant_momentum)

        def forward(self, x: Tensor) -> Tensor:
            qx, qw = self._fake_quantized(x)
            return self._conv_forward(qx, conv, qw)

    QatConv.__name__ = QatConv.__qualname__ = "Qat" + base.__name__
    return QatConv


QatConv1d = _qat_conv(Conv1d, F.conv1d, "A Conv1d whose input and weight are fake-quantized "
                                        "(quantization-aware training).")
QatConv2d = _qat_conv(Conv2d, F.conv2d, "A Conv2d whose input and weight are fake-quantized "
                                        "(quantization-aware training).")
QatConv3d = _qat_conv(Conv3d, F.conv3d, "A Conv3d whose input and weight are fake-quantized "
                                        "(quantization-aware training).")
