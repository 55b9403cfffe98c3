"""Max/min (values and indices), amax/amin, argmax/argmin and norms, with their Tensor methods."""
from __future__ import annotations

import math
from typing import NamedTuple

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.reduce import dims_attr
from actorflow.ops import registry
from actorflow.ops._common import F
from actorflow.tensor import Tensor, register_tensor_methods

_max_dim = registry.get("max_dim")
_min_dim = registry.get("min_dim")
_amax = registry.get("amax")
_amin = registry.get("amin")
_argmax = registry.get("argmax")
_argmin = registry.get("argmin")
_norm = registry.get("norm")
_cast = registry.get("cast")


class ValuesIndices(NamedTuple):
    """What ``max``/``min`` along a dim return: ``.values``, ``.indices`` (also unpackable)."""

    values: Tensor
    indices: Tensor


def _int_dim(name: str, dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        try:
            return int(dim.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"{name}: dim must be an int, got {dim!r}") from None
    return dim


def _extremum(name: str, op_dim, op_all, pairwise: str):
    def fn(input: Tensor, dim=None, keepdim: bool = False):
        if isinstance(dim, Tensor):  # max(a, b): the elementwise form
            return getattr(F, pairwise)(input, dim)
        if dim is None:
            return _reduce_all(op_all, input, {"dim": None, "keepdim": False})
        values, indices = apply(op_dim, [input], {"dim": _int_dim(name, dim),
                                                  "keepdim": keepdim})
        return ValuesIndices(values, indices)

    fn.__name__ = name
    fn.__doc__ = (f"``{name}(input)``: the {name}imum value; ``{name}(input, dim, keepdim)``: "
                  f"``(values, indices)`` along ``dim``; ``{name}(input, other)``: "
                  f"elementwise ``{pairwise}``.")
    return fn


max = _extremum("max", _max_dim, _amax, "maximum")
min = _extremum("min", _min_dim, _amin, "minimum")


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Largest value over ``dim`` (an int or tuple; all dims by default). Gradients are shared
    evenly among tied maxima."""
    return apply(_amax, [input], {"dim": dims_attr(dim), "keepdim": keepdim})[0]


def _reduce_all(op, input: Tensor, attrs: dict) -> Tensor:
    """amax/amin; a floating global tensor split along a reduced dim takes its minimum as
    ``-amax(-x)``, so only the partial maxima move (there is no partial_min sbp)."""
    if op is _amin and input.is_global and input.dtype.is_floating_point:
        dims = attrs["dim"]
        nd = input.dim() or 1
        dims = range(nd) if dims in (None, ()) else dims if isinstance(dims, tuple) else (dims,)
        reduced = {d % nd for d in dims if isinstance(d, int)}
        if any(s.is_split and s.dim in reduced for s in input.sbp):
            return F.neg(apply(_amax, [F.neg(input)], attrs)[0])
    return apply(op, [input], attrs)[0]


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Smallest value over ``dim`` (see ``amax``)."""
    return _reduce_all(_amin, input, {"dim": dims_attr(dim), "keepdim": keepdim})


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the largest value along ``dim`` (of the flattened input when None)."""
    d = None if dim is None else _int_dim("argmax", dim)
    return apply(_argmax, [input], {"dim": d, "keepdim": keepdim})[0]


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """int64 index of the smallest value along ``dim`` (of the flattened input when None)."""
    d = None if dim is None else _int_dim("argmin", dim)
    return apply(_argmin, [input], {"dim": d, "keepdim": keepdim})[0]


def _norm_p(p) -> float:
    if p is None or p == "fro":
        return 2.0
    if isinstance(p, str):
        if p in ("inf", "-inf"):
            return float(p)
        raise ValueError(f"norm: unsupported norm type {p!r} (supported: a number, inf, -inf, "
                         f"'fro')")
    p = float(p)
    if math.isnan(p):
        raise ValueError("norm: p must not be NaN")
    return p


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm over ``dim`` (all elements when None): ``p`` = 2 / 'fro' (default), 1,
    inf, -inf, 0 (count of nonzeros) or any other number."""
    if dtype is not None and dt.as_dtype(dtype) is not input.dtype:
        input = apply(_cast, [input], {"dtype": dt.as_dtype(dtype)})[0]
    return apply(_norm, [input], {"p": _norm_p(p), "dim": dims_attr(dim),
                                  "keepdim": keepdim})[0]


register_tensor_methods({
    "max": max, "min": min, "amax": amax, "amin": amin, "argmax": argmax, "argmin": argmin,
    "norm": norm,
})

__all__ = ["max", "min", "amax", "amin", "argmax", "argmin", "norm"]
