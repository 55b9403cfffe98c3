"""More activation layers: ReLU6, SELU, CELU, Mish, Hardtanh, Hardsigmoid, Hardswish,
Hardshrink, Softshrink, Softsign, LogSigmoid, Tanhshrink, Threshold, PReLU, GLU, Softmin and
QuickGELU (each a thin layer over its functional op)."""
from __future__ import annotations

from actorflow.functional.creation import full
from actorflow.nn import functional as F
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


class _Inplace(Module):
    """An activation ``fn(x, inplace=...)`` without other parameters."""

    _fn = None

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    """An activation ``fn(x)`` without parameters."""

    _fn = None

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input)


class ReLU6(_Inplace):
    """``min(max(x, 0), 6)``."""

    _fn = staticmethod(F.relu6)


class SELU(_Inplace):
    """Scaled ELU with the self-normalising constants."""

    _fn = staticmethod(F.selu)


class Mish(_Inplace):
    """``x * tanh(softplus(x))``."""

    _fn = staticmethod(F.mish)


class Hardsigmoid(_Inplace):
    """``clamp(x / 6 + 1/2, 0, 1)``."""

    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Inplace):
    """``x * hardsigmoid(x)``."""

    _fn = staticmethod(F.hardswish)


class Softsign(_Plain):
    """``x / (1 + |x|)``."""

    _fn = staticmethod(F.softsign)


class LogSigmoid(_Plain):
    """``log(sigmoid(x))``."""

    _fn = staticmethod(F.logsigmoid)


class Tanhshrink(_Plain):
    """``x - tanh(x)``."""

    _fn = staticmethod(F.tanhshrink)


class QuickGELU(_Plain):
    """``x * sigmoid(1.702 x)``."""

    _fn = staticmethod(F.quick_gelu)


class SquareReLU(_Plain):
    """``relu(x) ** 2`` (OneFlow's, as in the Primer transformer)."""

    _fn = staticmethod(F.square_relu)


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    """Clamp to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class _Shrink(Module):
    _fn = None

    def __init__(self, lambd: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.lambd = lambd
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.lambd, self.inplace)

    def extra_repr(self) -> str:
        return f"lambd={self.lambd}" + (", inplace=True" if self.inplace else "")


class Hardshrink(_Shrink):
    """``x`` where ``|x| > lambd``, else 0."""

    _fn = staticmethod(F.hardshrink)


class Softshrink(_Shrink):
    """``x -+ lambd`` where ``|x| > lambd``, else 0."""

    _fn = staticmethod(F.softshrink)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class PReLU(Module):
    """``x`` where positive, else ``weight * x``, with a learned ``weight`` of
    ``num_parameters`` elements (1, or one per channel: dim 1 of the input), initialised to
    ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        w = full((num_parameters,), float(init), dtype=dtype, device=device)
        self.weight = Parameter(w)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """Gated linear unit over ``dim``: first half times the sigmoid of the second half."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmin(Module):
    """``softmax(-x)`` over ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


__all__ = ["ReLU6", "SELU", "CELU", "Mish", "Hardtanh", "Hardsigmoid", "Hardswish",
           "Hardshrink", "Softshrink", "Softsign", "LogSigmoid", "Tanhshrink", "Threshold",
           "PReLU", "GLU", "Softmin", "QuickGELU", "SquareReLU"]
