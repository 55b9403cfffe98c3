"""Activation layers (each a thin layer over its functional op), Softmax/LogSoftmax/Softmin
and Dropout."""
from __future__ import annotations

from actorflow.functional.creation import full
from actorflow.nn import functional as F
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class ReLU(Module):
    """``max(x, 0)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class GELU(Module):
    """Gaussian error linear unit; ``approximate='tanh'`` uses the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate='{self.approximate}'"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class LeakyReLU(Module):
    """``x`` for ``x >= 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class RReLU(Module):
    """Randomized leaky ReLU: negative inputs scaled by a slope drawn from [lower, upper] per
    element in training, by ``(lower + upper) / 2`` in eval mode."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
                 inplace: bool = False) -> None:
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")


class ELU(Module):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta`` (linear above ``threshold``)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """Softmax over ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log of the softmax over ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Dropout(Module):
    """Zeroes each element with probability ``p`` while training (scaling the rest by
    ``1 / (1 - p)``); the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False, generator=None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.generator = generator

    def forward(self, input: Tensor, addend: Tensor | None = None) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace, generator=self.generator,
                         addend=addend)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


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
