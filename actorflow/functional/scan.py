"""``logcumsumexp``, ``cummax``, ``cummin`` (ops in ``ops/scan.py``), ``index_fill`` /
``index_fill_`` (``ops/index_fill.py``) and ``histc`` (``ops/histogram.py``), as flow.*
functions and Tensor methods."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional._base import is_scalar
from actorflow.functional.creation import zeros_like
from actorflow.functional.index import _index_tensor
from actorflow.functional.reduce_extrema import ValuesIndices, _int_dim
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_LOGCUMSUMEXP = registry.get("logcumsumexp")
_CUMMAX = registry.get("cummax")
_CUMMIN = registry.get("cummin")
_INDEX_FILL = registry.get("index_fill")
_HISTC = registry.get("histc")


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))``, computed without overflow."""
    return apply(_LOGCUMSUMEXP, [input], {"dim": _int_dim("logcumsumexp", dim)})[0]


def cummax(input: Tensor, dim: int) -> ValuesIndices:
    """``(values, indices)``: the running maximum along ``dim`` and where it was found (the
    latest index among equal values; NaN propagates)."""
    values, indices = apply(_CUMMAX, [input], {"dim": _int_dim("cummax", dim)})
    return ValuesIndices(values, indices)


def cummin(input: Tensor, dim: int) -> ValuesIndices:
    """``(values, indices)``: the running minimum along ``dim`` and where it was found (the
    latest index among equal values; NaN propagates)."""
    values, indices = apply(_CUMMIN, [input], {"dim": _int_dim("cummin", dim)})
    return ValuesIndices(values, indices)


def _fill_value(value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"index_fill: only a 0-d value tensor (or a number) can fill, got "
                             f"a tensor of shape {tuple(value.shape)}")
        return value
    if not is_scalar(value):
        raise TypeError(f"index_fill: value must be a number or a 0-d tensor, got "
                        f"{type(value).__name__}")
    return value.item() if hasattr(value, "item") else value


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy of ``input`` with every element at ``index`` (a 0-d or 1-d integer tensor)
    along ``dim`` set to ``value`` (a number, or a 0-d tensor, which then gets the sum of the
    gradient at the filled positions)."""
    index = _index_tensor(index)
    dim = _int_dim("index_fill", dim)
    value = _fill_value(value)
    if isinstance(value, Tensor):
        kept = apply(_INDEX_FILL, [input, index], {"dim": dim, "value": 0})[0]
        mask = apply(_INDEX_FILL, [zeros_like(input), index], {"dim": dim, "value": 1})[0]
        return kept + mask * value.to(input.dtype)
    return apply(_INDEX_FILL, [input, index], {"dim": dim, "value": value})[0]


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place ``index_fill``."""
    value = _fill_value(value)
    if isinstance(value, Tensor):
        return self.copy_(index_fill(self, dim, index, value))
    return apply(_INDEX_FILL, [self, _index_tensor(index)],
                 {"dim": _int_dim("index_fill_", dim), "value": value}, out=[self])[0]


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``input``'s values in ``bins`` equal bins over ``[min, max]`` (both 0,
    or equal: the data's range); values outside are not counted."""
    return apply(_HISTC, [input], {"bins": bins, "min": float(min), "max": float(max)})[0]


register_tensor_methods({"logcumsumexp": logcumsumexp, "cummax": cummax, "cummin": cummin,
                         "index_fill": index_fill, "index_fill_": index_fill_, "histc": histc})

__all__ = ["logcumsumexp", "cummax", "cummin", "index_fill", "index_fill_", "histc"]
