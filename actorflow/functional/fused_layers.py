"""OneFlow's fused layer functions as composites: ``bias_add``, ``fused_matmul_bias`` and
``fused_mlp``. On the CPU a fusion buys nothing NumPy can use, so each is built from ``linear``
(whose op already takes a bias and which the graph passes fuse with a following activation),
``add`` and ``relu``; the gradients are those ops' rules."""
from __future__ import annotations

from typing import Sequence

from actorflow.functional.elementwise import add, mul, relu
from actorflow.functional.nn_ops import linear
from actorflow.tensor import Tensor

__all__ = ["bias_add", "fused_matmul_bias", "fused_mlp"]


def bias_add(x: Tensor, bias: Tensor, axis: int = 1) -> Tensor:
    """``x + bias`` with the 1-d ``bias`` laid along dim ``axis`` of ``x``."""
    nd = len(x._shape)
    ax = axis + nd if axis < 0 else axis
    if not 0 <= ax < nd:
        raise ValueError(f"bias_add: axis {axis} is out of range for x of shape "
                         f"{tuple(x._shape)}")
    if len(bias._shape) != 1 or bias._shape[0] != x._shape[ax]:
        raise ValueError(f"bias_add: bias must be 1-d with x.shape[{axis}] = {x._shape[ax]} "
                         f"elements, got shapes x {tuple(x._shape)}, bias {tuple(bias._shape)}")
    shape = [1] * nd
    shape[ax] = bias._shape[0]
    return add(x, bias.reshape(shape))


def fused_matmul_bias(x: Tensor, weight: Tensor, bias: Tensor,
                      _add_to_output: Tensor | None = None, alpha: float = 1.0,
                      beta: float = 1.0) -> Tensor:
    """``alpha * x @ weight.T + bias [+ beta * _add_to_output]`` (``weight`` is
    (out_features, in_features), ``bias`` (out_features,))."""
    if alpha == 1.0:
        y = linear(x, weight, bias)
    else:
        y = add(mul(linear(x, weight), alpha), bias)
    if _add_to_output is not None:
        y = add(y, _add_to_output if beta == 1.0 else mul(_add_to_output, beta))
    return y


def fused_mlp(x: Tensor, weights: Sequence[Tensor], biases: Sequence[Tensor],
              skip_final_activation: bool) -> Tensor:
    """A stack of ``relu(linear(x, w_i, b_i))`` layers; the last one without the relu when
    ``skip_final_activation``."""
    weights, biases = list(weights), list(biases)
    if not weights or len(weights) != len(biases):
        raise ValueError(f"fused_mlp: needs as many weights as biases (at least one), got "
                         f"{len(weights)} weights and {len(biases)} biases")
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = linear(x, w, b)
        if i + 1 < len(weights) or not skip_final_activation:
            x = relu(x)
    return x
