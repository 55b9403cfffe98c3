"""Special functions and the composite activations and pointwise ops of OneFlow's functional API:
``erfinv``, ``lgamma``, ``digamma``, ``polygamma``, ``logaddexp(2)``, ``addcmul``/``addcdiv``,
``quick_gelu``, ``square_relu``, ``fast_gelu``, ``prelu``, ``glu``, ``tanhshrink``,
``broadcast_shapes``/``broadcast_tensors``, and their Tensor methods.

The composites are sums of registered ops, so their gradients come from those ops' rules.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional import activation as _act
from actorflow.functional import elementwise as _ew
from actorflow.functional._base import as_tensor_like
from actorflow.functional.elementwise import binary_fn, unary_fn
from actorflow.functional.linalg import matmul
from actorflow.functional.shape import chunk
from actorflow.ops import registry
from actorflow.ops._common import broadcast_shapes as _broadcast_shapes
from actorflow.tensor import Size, Tensor, register_tensor_methods

erfinv, erfinv_ = unary_fn("erfinv")
lgamma, lgamma_ = unary_fn("lgamma")
digamma, digamma_ = unary_fn("digamma")
logaddexp, _ = binary_fn("logaddexp", commutative=True)
logaddexp2, _ = binary_fn("logaddexp2", commutative=True)
_zeta, _ = binary_fn("zeta")


def zeta(input, other) -> Tensor:
    """The Hurwitz zeta function ``sum_k (other + k) ** -input``, elementwise, broadcasting
    (either may be a number; ``zeta(x, 1)`` is Riemann's). Differentiable in ``other``."""
    return _zeta(input, other)

_polygamma = registry.get("polygamma")
_conj, _real, _imag = registry.get("conj"), registry.get("real"), registry.get("imag")


def conj(x: Tensor) -> Tensor:
    """The complex conjugate (a real tensor is returned as it is)."""
    return apply(_conj, [x], {})[0] if x.dtype.is_complex else x


def real(x: Tensor) -> Tensor:
    """The real part of a complex tensor (a real tensor is returned as it is)."""
    return apply(_real, [x], {})[0] if x.dtype.is_complex else x


def imag(x: Tensor) -> Tensor:
    """The imaginary part of a complex tensor (an error for a real tensor, as in PyTorch)."""
    return apply(_imag, [x], {})[0]


_angle = registry.get("angle")


def angle(input: Tensor) -> Tensor:
    """The argument of each element, ``atan2(imag, real)`` (of a real tensor: 0 or pi)."""
    return apply(_angle, [input], {})[0]


def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001  (flow.complex, as torch)
    """The complex tensor ``real + i imag`` of two float tensors of one dtype (float32 gives
    complex64, float64 complex128), broadcasting."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor) or t.dtype.name not in ("float32", "float64"):
            raise TypeError(f"complex: expected {name} to be a float32 or float64 tensor, got "
                            f"{getattr(t, 'dtype', type(t).__name__)}")
    if real.dtype is not imag.dtype:
        raise TypeError(f"complex: real and imag must have the same dtype, got {real.dtype} "
                        f"and {imag.dtype}")
    return _ew.add(real, _ew.mul(imag, 1j))


def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``."""
    return complex(_ew.mul(abs, _act.cos(angle)), _ew.mul(abs, _act.sin(angle)))


def is_complex(x: Tensor) -> bool:
    """True when ``x`` has a complex dtype."""
    return x.dtype.is_complex


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of digamma, elementwise (``n = 0`` is digamma)."""
    if isinstance(n, Tensor) and isinstance(input, int):  # Tensor.polygamma(n) order
        n, input = input, n
    return apply(_polygamma, [input], {"n": int(n)})[0]


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)


def _polygamma_inplace(self: Tensor, n: int) -> Tensor:
    return apply(_polygamma, [self], {"n": int(n)}, out=[self])[0]


# ---- addcmul, addcdiv -----------------------------------------------------------------------

def _scaled(t: Tensor, value) -> Tensor:
    return t if isinstance(value, (int, float)) and value == 1 else _ew.mul(t, value)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (broadcasting)."""
    return _ew.add(input, _scaled(_ew.mul(tensor1, tensor2), value))


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (broadcasting)."""
    return _ew.add(input, _scaled(_ew.div(tensor1, tensor2), value))


def addcmul_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """In-place ``addcmul`` (an in-place add, so autograd sees one in-place op)."""
    return _ew.add_(self, _scaled(_ew.mul(tensor1, tensor2), value))


def addcdiv_(self: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """In-place ``addcdiv`` (an in-place add, so autograd sees one in-place op)."""
    return _ew.add_(self, _scaled(_ew.div(tensor1, tensor2), value))


# ---- composite activations --------------------------------------------------------------------

def quick_gelu(x: Tensor) -> Tensor:
    """``x * sigmoid(1.702 x)``: a fast GELU approximation."""
    return _ew.mul(x, _act.sigmoid(_ew.mul(x, 1.702)))


def square_relu(x: Tensor) -> Tensor:
    """``relu(x) ** 2``."""
    return _act.square(_ew.relu(x))


def gelu_with_approximate(x: Tensor, approximate: str = "none") -> Tensor:
    """``gelu(x, approximate)`` under OneFlow's functional name."""
    return _act.gelu(x, approximate=approximate)


def fast_gelu(x: Tensor) -> Tensor:
    """The tanh approximation of GELU."""
    return _act.gelu(x, approximate="tanh")


def fused_fast_gelu_mul(x: Tensor, multiplier: Tensor) -> Tensor:
    """``fast_gelu(x) * multiplier``."""
    return _ew.mul(fast_gelu(x), multiplier)


def tanhshrink(x: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return _ew.sub(x, _act.tanh(x))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: the first half of ``input`` along ``dim`` times the sigmoid of the
    second half."""
    n = input._shape[dim] if input._shape else 0
    if n % 2:
        raise RuntimeError(f"glu: halving dimension {dim} of a tensor of shape "
                           f"{tuple(input._shape)} needs an even size, got {n}")
    a, b = chunk(input, 2, dim)
    return _ew.mul(a, _act.sigmoid(b))


_GLU_ACTIVATIONS = {"none": lambda t: t, "sigmoid": _act.sigmoid, "relu": _ew.relu,
                    "gelu": _act.gelu, "fast_gelu": fast_gelu, "silu": _act.silu}


def fused_glu(x: Tensor, w: Tensor, b: Tensor | None = None, v: Tensor | None = None,
              c: Tensor | None = None, activation: str = "none") -> Tensor:
    """OneFlow's fused GLU: ``(x w^T + b) * act(x v^T + c)``; without ``v`` the product
    ``x w^T + b`` is split in halves along the last dim (hidden, gate)."""
    act = _GLU_ACTIVATIONS.get(activation)
    if act is None:
        raise ValueError(f"fused_glu: activation must be one of {sorted(_GLU_ACTIVATIONS)}, "
                         f"got {activation!r}")
    h = matmul(x, w, transpose_b=True)
    if b is not None:
        h = _ew.add(h, b)
    if v is None:
        hidden, gate = chunk(h, 2, -1)
    else:
        gate = matmul(x, v, transpose_b=True)
        if c is not None:
            gate = _ew.add(gate, c)
        hidden = h
    return _ew.mul(hidden, act(gate))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where positive, else ``weight * x``; ``weight`` has one element or one per channel
    (dim 1 of ``input``)."""
    weight = as_tensor_like(weight, input, "prelu")
    n = weight.numel()
    if n != 1:
        if input.ndim < 2 or input._shape[1] != n:
            raise RuntimeError(f"prelu: a weight of {n} elements needs the channel dim (1) of "
                               f"the input to have that size, got input shape "
                               f"{tuple(input._shape)}")
        weight = weight.reshape((n,) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    return _ew.where(_ew.gt(input, 0), input, _ew.mul(weight, input))


# ---- broadcasting -----------------------------------------------------------------------------

def broadcast_shapes(*shapes) -> tuple:
    """The shape the given shapes (tuples or ints) broadcast to."""
    norm = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    if not norm:
        return Size(())
    return Size(_broadcast_shapes("broadcast_shapes", *norm))


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common broadcast shape (views in eager mode)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*[t._shape for t in tensors])
    return tuple(_ew.expand(t, tuple(shape)) for t in tensors)


register_tensor_methods({
    "erfinv": erfinv, "erfinv_": erfinv_, "lgamma": lgamma, "lgamma_": lgamma_,
    "digamma": digamma, "digamma_": digamma_, "polygamma": _polygamma_method,
    "polygamma_": _polygamma_inplace, "logaddexp": logaddexp, "logaddexp2": logaddexp2,
    "addcmul": addcmul, "addcmul_": addcmul_, "addcdiv": addcdiv, "addcdiv_": addcdiv_,
    "conj": conj, "is_complex": is_complex, "zeta": zeta, "angle": angle,
})
# Tensor.real / Tensor.imag are properties, as in PyTorch
Tensor.real = property(real)
Tensor.imag = property(imag)

__all__ = [
    "erfinv", "lgamma", "digamma", "polygamma", "logaddexp", "logaddexp2", "addcmul", "addcdiv",
    "quick_gelu", "square_relu", "gelu_with_approximate", "fast_gelu", "fused_fast_gelu_mul",
    "tanhshrink", "glu", "fused_glu", "prelu", "broadcast_shapes", "broadcast_tensors", "conj",
    "real", "imag", "is_complex", "zeta", "angle", "complex", "polar",
]
