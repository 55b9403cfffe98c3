"""Linear algebra functional API (matmul), the ``flow.linalg`` norms and ``normalize``, with
their Tensor methods.

The norms are compositions of the registered ``norm`` op (the one behind ``flow.norm``), so they
share its kernels and gradient rule and run eagerly, inside gradient rules and in nn.Graph.
"""
from __future__ import annotations

import math
import numbers

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional._base import as_tensor_like
from actorflow.functional.elementwise import cast, clamp_min, div
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.ops._common import norm_axis
from actorflow.ops.reduce import reduce_axes
from actorflow.tensor import Tensor, register_tensor_methods

_matmul = registry.get("matmul")
_norm = registry.get("norm")


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product with NumPy's rules for 1-d and batched (broadcast) operands."""
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    return apply(_matmul, [as_tensor_like(a), as_tensor_like(b)], attrs)[0]


def _rmatmul(self, other):
    return matmul(other, self)


# ---- norms --------------------------------------------------------------------------------------

def _float_input(name: str, x, dtype) -> Tensor:
    """``x`` checked to be a floating tensor, cast to ``dtype`` (which may only widen it)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating point tensor, got {x.dtype} (input shape "
                        f"{tuple(x._shape)})")
    if dtype is None:
        return x
    d = dt.as_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"{name}: dtype must be a floating point type, got {d}")
    if dt.promote_types(x.dtype, d) is not d:
        raise TypeError(f"{name}: the input's {x.dtype} cannot be converted to {d} without "
                        f"narrowing (input shape {tuple(x._shape)})")
    return x if d is x.dtype else cast(x, d)


def _ord_number(name: str, ord) -> float:
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{name}: ord must be a number (int, float, inf or -inf), got {ord!r}")
    return float(ord)


def _vector_norm(name: str, x: Tensor, p: float, dim, keepdim: bool) -> Tensor:
    axes = reduce_axes(name, dim, len(x._shape))
    if p in (math.inf, -math.inf):
        for a in axes:  # max/min over nothing has no value (PyTorch raises too)
            if a < len(x._shape) and x._shape[a] == 0:
                raise ValueError(f"{name}: cannot compute the {p} norm over dim {a}, which is "
                                 f"empty (input shape {tuple(x._shape)})")
    return apply(_norm, [x], {"p": p, "dim": axes, "keepdim": bool(keepdim)})[0]


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Vector ``ord``-norm of ``x`` over ``dim`` (an int or tuple; None: all elements, as if
    flattened). ``ord``: any number, ``inf`` (max |x|), ``-inf`` (min |x|) or 0 (count of
    nonzeros); otherwise ``sum(|x|**ord)**(1/ord)``."""
    name = "linalg.vector_norm"
    x = _float_input(name, x, dtype)
    return _vector_norm(name, x, _ord_number(name, ord), dim, keepdim)


def _matrix_dims(name: str, x: Tensor, dim) -> tuple:
    nd = len(x._shape)
    if nd < 2:
        raise ValueError(f"{name}: the input must have at least 2 dims, got shape "
                         f"{tuple(x._shape)}")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise ValueError(f"{name}: dim must be a 2-tuple of ints, got {dim!r}")
    for d in dim:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"{name}: dim must be a 2-tuple of ints, got {dim!r}")
    d0, d1 = (norm_axis(name, int(d), nd) for d in dim)
    if d0 == d1:
        raise ValueError(f"{name}: the two dims must differ, got {tuple(dim)} (input shape "
                         f"{tuple(x._shape)})")
    return d0, d1


_MATRIX_ORDS = "'fro', 1, -1, inf, -inf"


def _matrix_norm(name: str, x: Tensor, ord, dim, keepdim: bool) -> Tensor:
    d0, d1 = _matrix_dims(name, x, dim)
    if isinstance(ord, str):
        if ord == "fro":
            return apply(_norm, [x], {"p": 2.0, "dim": (d0, d1), "keepdim": bool(keepdim)})[0]
        if ord == "nuc":
            raise NotImplementedError(f"{name}: ord='nuc' needs singular values, which actorflow "
                                      f"does not compute yet; supported: {_MATRIX_ORDS}")
        raise ValueError(f"{name}: unsupported ord {ord!r}; supported: {_MATRIX_ORDS}")
    p = _ord_number(name, ord)
    if p in (2.0, -2.0):
        raise NotImplementedError(f"{name}: ord={ord!r} needs singular values, which actorflow "
                                  f"does not compute yet; supported: {_MATRIX_ORDS}")
    if p not in (1.0, -1.0, math.inf, -math.inf):
        raise ValueError(f"{name}: unsupported ord {ord!r}; supported: {_MATRIX_ORDS}")
    # ord 1: largest column sum of |x| (sum over d0, max over d1); inf: largest row sum
    summed, extreme = (d0, d1) if abs(p) == 1 else (d1, d0)
    if p < 0 and x._shape[extreme] == 0:
        raise ValueError(f"{name}: cannot compute the {ord} norm: dim {extreme} is empty and "
                         f"a minimum over nothing has no value (input shape {tuple(x._shape)})")
    # |sums| are >= 0, so their inf / -inf vector norms are their max / min (0 when empty)
    sums = apply(_norm, [x], {"p": 1.0, "dim": (summed,), "keepdim": True})[0]
    r = apply(_norm, [sums], {"p": math.copysign(math.inf, p), "dim": (extreme,),
                              "keepdim": True})[0]
    if keepdim:
        return r
    return reshape(r, tuple(s for i, s in enumerate(x._shape) if i not in (d0, d1)))


def matrix_norm(x: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """Matrix norm of the matrices spanned by the two dims ``dim`` (other dims are batch dims).
    ``ord``: 'fro' (Frobenius), 1 / -1 (max / min column sum of |x|), inf / -inf (max / min
    row sum). 'nuc', 2 and -2 need an SVD and raise NotImplementedError."""
    name = "linalg.matrix_norm"
    return _matrix_norm(name, _float_input(name, x, dtype), ord, dim, keepdim)


def norm(x: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``flow.linalg.norm``: a vector norm when ``dim`` is an int or a 1-tuple, a matrix norm
    when it is a 2-tuple. Without ``dim``: the 2-norm of all elements when ``ord`` is None,
    else a vector (1-d input) or matrix (2-d input) norm of order ``ord``."""
    name = "linalg.norm"
    x = _float_input(name, x, dtype)
    if isinstance(dim, numbers.Integral) and not isinstance(dim, bool):
        dim = (int(dim),)
    if dim is None:
        if ord is None:
            return _vector_norm(name, x, 2.0, None, keepdim)
        nd = len(x._shape)
        if nd not in (1, 2):
            raise ValueError(f"{name}: when ord is given without dim the input must be 1-d or "
                             f"2-d, got shape {tuple(x._shape)}")
        dim = tuple(range(nd))
    if not isinstance(dim, (tuple, list)) or len(dim) not in (1, 2):
        raise ValueError(f"{name}: dim must be an int or a tuple of 1 or 2 ints, got {dim!r}")
    if len(dim) == 2:
        return _matrix_norm(name, x, "fro" if ord is None else ord, dim, keepdim)
    if isinstance(ord, str):
        raise ValueError(f"{name}: ord={ord!r} is a matrix norm and needs two dims, got dim="
                         f"{tuple(dim)}")
    return _vector_norm(name, x, 2.0 if ord is None else _ord_number(name, ord), dim, keepdim)


def normalize(input: Tensor, p: float = 2.0, dim=1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(vector_norm(input, p, dim, keepdim=True), eps)``: Lp-normalize along ``dim``
    (an int or tuple of ints)."""
    name = "normalize"
    x = _float_input(name, input, None)
    r = div(x, clamp_min(_vector_norm(name, x, _ord_number(name, p), dim, True), eps))
    if out is not None:
        out.copy_(r)
        return out
    return r


register_tensor_methods({"matmul": matmul, "rmatmul": _rmatmul})

__all__ = ["matmul"]  # the norms live in flow.linalg, normalize in flow.nn.functional
