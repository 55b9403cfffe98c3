"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode,
searchsorted, unique, bincount, roc_auc_score, and the NaN-skipping reductions nansum and
nanmean, with their Tensor methods."""
from __future__ import annotations

import numpy as np

from actorflow.autograd.grad_mode import no_grad
from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional._base import as_tensor_like, is_scalar
from actorflow.functional.activation import ceil, floor, isnan, logical_not, round
from actorflow.functional.elementwise import cast, expand, mul, where
from actorflow.functional.index import gather
from actorflow.functional.shape import movedim, narrow, reshape, unsqueeze
from actorflow.functional.reduce import dims_attr, sum
from actorflow.functional.reduce_extrema import ValuesIndices, _int_dim
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_sort = registry.get("sort")
_topk = registry.get("topk")
_kthvalue = registry.get("kthvalue")
_median_dim = registry.get("median_dim")
_median_all = registry.get("median")
_mode = registry.get("mode")
_searchsorted = registry.get("searchsorted")
_unique = registry.get("unique")
_bincount = registry.get("bincount")
_roc_auc_score = registry.get("roc_auc_score")


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """``(values, indices)`` of ``input`` sorted along ``dim``. The sort is always stable
    (tied elements keep their order), so ``stable`` changes nothing; NaN sorts as largest."""
    values, indices = apply(_sort, [input], {"dim": _int_dim("sort", dim),
                                             "descending": bool(descending)})
    return ValuesIndices(values, indices)


def argsort(input: Tensor, dim: int = -1, descending: bool = False,
            stable: bool = False) -> Tensor:
    """The int64 indices that sort ``input`` along ``dim`` (stable)."""
    return sort(input, dim, descending).indices


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dim (the values of ``sort(input, 0)``)."""
    return sort(input, 0).values


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """``(values, indices)`` of the ``k`` largest elements along ``dim`` (``largest=False``:
    smallest), in sorted order. ``dim=None`` means the last dim (OneFlow)."""
    dim = -1 if dim is None else _int_dim("topk", dim)
    values, indices = apply(_topk, [input], {"k": _int_dim("topk", k), "dim": dim,
                                             "largest": bool(largest)})
    return ValuesIndices(values, indices)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """``(values, indices)`` of the ``k``-th smallest element (k from 1) along ``dim``."""
    values, indices = apply(_kthvalue, [input], {"k": _int_dim("kthvalue", k),
                                                 "dim": _int_dim("kthvalue", dim),
                                                 "keepdim": bool(keepdim)})
    return ValuesIndices(values, indices)


def _median_impl(name: str, ignore_nan: bool, input: Tensor, dim, keepdim: bool):
    if dim is None:
        return apply(_median_all, [input], {"ignore_nan": ignore_nan})[0]
    values, indices = apply(_median_dim, [input], {"dim": _int_dim(name, dim),
                                                   "keepdim": bool(keepdim),
                                                   "ignore_nan": ignore_nan})
    return ValuesIndices(values, indices)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """``median(input)``: the lower median of all elements (NaN if any is NaN);
    ``median(input, dim, keepdim)``: ``(values, indices)`` along ``dim``."""
    return _median_impl("median", False, input, dim, keepdim)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """``median`` that skips NaNs (NaN only where every element is NaN)."""
    return _median_impl("nanmedian", True, input, dim, keepdim)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest among equally
    frequent ones) and the index of its last occurrence."""
    values, indices = apply(_mode, [input], {"dim": _int_dim("mode", dim),
                                             "keepdim": bool(keepdim)})
    return ValuesIndices(values, indices)


def searchsorted(sorted_sequence: Tensor, values, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None, sorter: Tensor | None = None
                 ) -> Tensor:
    """Indices where ``values`` (a tensor or a number) would be inserted into the innermost dim
    of ``sorted_sequence`` to keep it sorted; ``right=True`` / ``side='right'`` takes the
    position after equal elements; ``sorter`` sorts an unsorted sequence."""
    if side not in (None, "left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise ValueError("searchsorted: side='left' and right=True contradict each other")
    right = bool(right) or side == "right"
    if is_scalar(values):
        values = as_tensor_like(values, sorted_sequence, "searchsorted")
    inputs = [sorted_sequence, values] + ([sorter] if sorter is not None else [])
    return apply(_searchsorted, inputs, {"right": right, "out_int32": bool(out_int32)})[0]


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None, *, dtype=dt.int32):
    """The distinct elements of ``input`` as a 1-d tensor (sorted, or with ``sorted=False`` in
    order of first occurrence), optionally with the inverse indices (``input``'s shape) and
    the counts, of ``dtype`` (OneFlow's default: int32). Reads the values (eager only)."""
    if dim is not None:
        raise NotImplementedError(f"unique: dim={dim} is not supported (only the flattened "
                                  f"form; input shape {tuple(input._shape)})")
    values, inverse, counts = apply(_unique, [input], {"sorted": bool(sorted),
                                                       "dtype": dt.as_dtype(dtype)})
    if not return_inverse and not return_counts:
        return values
    out = (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())
    return out


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(input) occurs in a 1-d non-negative integer tensor (the
    sum of ``weights`` at its positions when given); at least ``minlength`` long."""
    inputs = [input] if weights is None else [input, as_tensor_like(weights)]
    return apply(_bincount, inputs, {"minlength": int(minlength or 0)})[0]


def roc_auc_score(label: Tensor, pred: Tensor) -> Tensor:
    """Area under the ROC curve of scores ``pred`` for binary ``label``: a float32 tensor of
    shape (1,)."""
    return apply(_roc_auc_score, [as_tensor_like(label), as_tensor_like(pred)], {})[0]


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_q(name: str, q, like: Tensor) -> tuple:
    """``q`` as a 1-d tensor of ``like``'s dtype, and whether it was a scalar."""
    if isinstance(q, Tensor):
        if len(q._shape) > 1:
            raise ValueError(f"{name}: q must be a scalar or a 1-d tensor, got shape "
                             f"{tuple(q._shape)}")
        scalar = not q._shape
        qt = cast(q, like.dtype) if q.dtype is not like.dtype else q
        qt = reshape(qt, (-1,))
        values = [] if qt.is_lazy else qt.numpy().tolist()
    else:
        scalar = is_scalar(q)
        values = [float(q)] if scalar else [float(v) for v in q]
        qt = as_tensor_like(np.asarray(values, dtype=like.dtype.np))
    if any(not 0 <= v <= 1 for v in values):
        raise ValueError(f"{name}: q values must be in the range [0, 1], got {values}")
    return qt, scalar


def _quantile(name: str, ignore_nan: bool, input: Tensor, q, dim, keepdim: bool,
              interpolation: str) -> Tensor:
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating point input, got {input.dtype} (input "
                        f"shape {tuple(input._shape)})")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {_INTERPOLATIONS}, got "
                         f"{interpolation!r}")
    qt, scalar = _quantile_q(name, q, input)
    shape = tuple(input._shape)
    if dim is None:
        x, d = reshape(input, (-1,)), 0
    else:
        d = _int_dim(name, dim)
        x = input if shape else reshape(input, (1,))
        d %= len(x._shape)
        x = movedim(x, d, -1)
    n = x._shape[-1]
    if n == 0:
        raise ValueError(f"{name}: the input must be non-empty along the reduced dim (input "
                         f"shape {shape})")
    s = sort(x, -1).values  # NaNs last
    nq = qt._shape[0]
    lead = tuple(s._shape[:-1])
    with no_grad():  # the positions to read: no gradient flows through them
        sd = s.detach()
        if ignore_nan:
            valid = sum(logical_not(isnan(sd)), -1, keepdim=True)  # int64
            ranks = mul(qt, cast(valid, sd.dtype) - 1)
            ranks = where(valid == 0, float(n - 1), ranks)
        else:
            ranks = expand(mul(qt, float(n - 1)), lead + (nq,))
            last = isnan(narrow(sd, -1, n - 1, 1))
            ranks = where(last, float(n - 1), ranks)
        if interpolation == "lower":
            ranks = floor(ranks)
        elif interpolation == "higher":
            ranks = ceil(ranks)
        elif interpolation == "nearest":
            ranks = round(ranks)
        below = cast(floor(ranks), dt.int64)
        above = cast(ceil(ranks), dt.int64)
        weights = ranks - floor(ranks) if interpolation == "linear" else None
    out = gather(s, -1, below)
    if interpolation in ("linear", "midpoint"):
        hi = gather(s, -1, above)
        w = weights if interpolation == "linear" else 0.5
        out = out + mul(hi - out, w)
    if keepdim:
        if dim is None:
            out = reshape(out, (1,) * len(shape) + (nq,))
        elif shape:
            out = movedim(unsqueeze(out, -2), -2, d)  # the reduced dim back at its place
    out = movedim(out, -1, 0)
    return reshape(out, tuple(out._shape[1:])) if scalar else out


def quantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles (a number, or a 1-d tensor giving a leading output dim) of
    ``input`` along ``dim`` (flattened when None), interpolating between the two nearest
    sorted elements (``linear``, ``lower``, ``higher``, ``midpoint``, ``nearest``); NaN where
    a reduced row holds a NaN."""
    return _quantile("quantile", False, input, q, dim, keepdim, interpolation)


def nanquantile(input: Tensor, q, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """``quantile`` over the elements that are not NaN (NaN only for all-NaN rows)."""
    return _quantile("nanquantile", True, input, q, dim, keepdim, interpolation)


def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``sum`` treating NaNs as zero."""
    x = where(isnan(input), 0.0, input) if input.dtype.is_floating_point \
        else input
    return sum(x, dims_attr(dim), keepdim, dtype=dtype)


def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """``mean`` over the elements that are not NaN (NaN where there is none)."""
    if not input.dtype.is_floating_point and dtype is None:
        raise TypeError(f"nanmean: expected a floating point input, got {input.dtype} (pass "
                        f"dtype=)")
    if dtype is not None:
        input = cast(input, dt.as_dtype(dtype))
    n = sum(cast(logical_not(isnan(input)), input.dtype), dims_attr(dim), keepdim)
    return nansum(input, dim, keepdim) / n


register_tensor_methods({
    "sort": sort, "argsort": argsort, "msort": msort, "topk": topk, "kthvalue": kthvalue,
    "median": median, "nanmedian": nanmedian, "mode": mode, "unique": unique,
    "bincount": bincount, "nansum": nansum, "nanmean": nanmean, "quantile": quantile,
    "nanquantile": nanquantile,
})

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode",
           "searchsorted", "unique", "bincount", "roc_auc_score", "nansum", "nanmean",
           "quantile", "nanquantile"]
