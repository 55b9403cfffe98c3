"""Reductions (``flow.sum``, ``flow.mean``, ``flow.prod``, ``flow.var``, ...), scans and their
Tensor methods. Max/min, arg-extrema and norms are in ``functional.reduce_extrema``."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.dispatch import apply
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_sum = registry.get("sum")
_mean = registry.get("mean")
_prod = registry.get("prod")
_var = registry.get("var")
_std = registry.get("std")
_logsumexp = registry.get("logsumexp")
_all = registry.get("all")
_any = registry.get("any")
_cumsum = registry.get("cumsum")
_cumprod = registry.get("cumprod")


def dims_attr(dim):
    """The ``dim`` attr: None, an int, or a tuple (lists become tuples)."""
    if isinstance(dim, (list, tuple)):
        return tuple(dim)
    if isinstance(dim, np.integer):
        return int(dim)
    return dim  # None or an int; anything else is rejected by the op's inference


def _dtype_attr(dtype):
    return dt.as_dtype(dtype) if dtype is not None else None


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over ``dim`` (an int, a tuple/list, or None for all dims); ints sum as int64."""
    return apply(_sum, [input], {"dim": dims_attr(dim), "keepdim": keepdim,
                                 "dtype": _dtype_attr(dtype)})[0]


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Mean over ``dim`` (all dims when None); needs a floating input or ``dtype=``."""
    return apply(_mean, [input], {"dim": dims_attr(dim), "keepdim": keepdim,
                                  "dtype": _dtype_attr(dtype)})[0]


def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product over one ``dim`` (of all elements when None); ints multiply as int64."""
    if dim is not None and not isinstance(dim, int):
        raise TypeError(f"prod: dim must be an int or None, got {dim!r}")
    return apply(_prod, [input], {"dim": dim, "keepdim": keepdim,
                                  "dtype": _dtype_attr(dtype)})[0]


def _correction(name: str, unbiased, correction) -> float:
    if correction is not None:
        if unbiased is not None:
            raise TypeError(f"{name}: pass either unbiased or correction, not both")
        return correction
    return 1 if unbiased is None or unbiased else 0


def _var_args(name, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var(x, False): the positional ``unbiased`` form
        dim, unbiased = None, dim
    return {"dim": dims_attr(dim), "keepdim": keepdim,
            "correction": _correction(name, unbiased, correction)}


def var(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """Variance over ``dim``: divides by ``N - correction`` (``unbiased=False``: by N)."""
    return apply(_var, [input], _var_args("var", dim, unbiased, keepdim, correction))[0]


def std(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """Standard deviation over ``dim`` (see ``var``)."""
    return apply(_std, [input], _var_args("std", dim, unbiased, keepdim, correction))[0]


def var_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None) -> tuple:
    """``(var, mean)`` over ``dim``."""
    return (var(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim if not isinstance(dim, bool) else None, keepdim))


def std_mean(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None) -> tuple:
    """``(std, mean)`` over ``dim``."""
    return (std(input, dim, unbiased, keepdim, correction=correction),
            mean(input, dim if not isinstance(dim, bool) else None, keepdim))


def reduce_sum_like(input: Tensor, like: Tensor, axis) -> Tensor:
    """OneFlow's ``_C.reduce_sum_like``: ``input`` summed over ``axis`` and laid out in the
    shape of ``like`` (which must hold as many elements as the sum)."""
    s = sum(input, dims_attr(axis), keepdim=True)
    shape = tuple(like._shape)
    if tuple(s._shape) == shape:
        return s
    if s.numel() != like.numel():
        raise ValueError(f"reduce_sum_like: the sum over axis {axis} of an input of shape "
                         f"{tuple(input._shape)} has shape {tuple(s._shape)}, which does not fit "
                         f"like's shape {shape}")
    return reshape(s, shape)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(input), dim))``, computed without overflow."""
    return apply(_logsumexp, [input], {"dim": dims_attr(dim), "keepdim": keepdim})[0]


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """True where every element over ``dim`` is nonzero (a bool tensor)."""
    return apply(_all, [input], {"dim": dims_attr(dim), "keepdim": keepdim})[0]


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """True where some element over ``dim`` is nonzero (a bool tensor)."""
    return apply(_any, [input], {"dim": dims_attr(dim), "keepdim": keepdim})[0]


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sum along ``dim``."""
    return apply(_cumsum, [input], {"dim": int(dim), "dtype": _dtype_attr(dtype)})[0]


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running product along ``dim``."""
    return apply(_cumprod, [input], {"dim": int(dim), "dtype": _dtype_attr(dtype)})[0]


register_tensor_methods({
    "sum": sum, "mean": mean, "prod": prod, "var": var, "std": std, "logsumexp": logsumexp,
    "all": all, "any": any, "cumsum": cumsum, "cumprod": cumprod,
})

__all__ = ["sum", "mean", "prod", "var", "std", "var_mean", "std_mean", "logsumexp", "all",
           "any", "cumsum", "cumprod", "reduce_sum_like"]
