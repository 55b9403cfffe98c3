"""flip, roll, tril/triu and pad (``flow.nn.functional.pad`` semantics) with Tensor methods."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_flip = registry.get("flip")
_roll = registry.get("roll")
_tril = registry.get("tril")
_triu = registry.get("triu")
_pad = registry.get("pad")


def _ints(name: str, value) -> tuple:
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    raise TypeError(f"{name}: expected an int or a sequence of ints, got {value!r}")


def flip(input: Tensor, dims) -> Tensor:
    """Reverse the order of entries along ``dims`` (an int or a sequence); a copy."""
    return apply(_flip, [input], {"dims": _ints("flip", dims)})[0]


def fliplr(input: Tensor) -> Tensor:
    """Flip the columns (dim 1) of a tensor with at least 2 dims."""
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:
    """Flip the rows (dim 0) of a tensor with at least 1 dim."""
    return flip(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Rotate entries by ``shifts`` along ``dims`` (the flattened tensor when ``dims`` is None);
    ``shifts`` and ``dims`` may be ints or equal-length sequences."""
    attrs = {"shifts": _ints("roll", shifts),
             "dims": None if dims is None else _ints("roll", dims)}
    return apply(_roll, [input], attrs)[0]


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle of the last two dims (entries above ``diagonal`` become 0)."""
    return apply(_tril, [input], {"diagonal": int(diagonal)})[0]


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle of the last two dims (entries below ``diagonal`` become 0)."""
    return apply(_triu, [input], {"diagonal": int(diagonal)})[0]


def _tril_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply(_tril, [self], {"diagonal": int(diagonal)}, out=[self])[0]


def _triu_(self: Tensor, diagonal: int = 0) -> Tensor:
    return apply(_triu, [self], {"diagonal": int(diagonal)}, out=[self])[0]


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad ``input``: ``pad = (left, right)`` for the last dim, then the one before, ...
    ``mode``: 'constant' (with ``value``, default 0; negative pads crop), or 'reflect',
    'replicate', 'circular' (up to the last 3 dims)."""
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in a value argument")
    return apply(_pad, [input], {"pad": _ints("pad", pad), "mode": mode, "value": value})[0]


def _flip_method(self: Tensor, *dims) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    return flip(self, tuple(dims))


register_tensor_methods({
    "flip": _flip_method, "fliplr": fliplr, "flipud": flipud, "roll": roll, "tril": tril,
    "triu": triu, "tril_": _tril_, "triu_": _triu_,
})

__all__ = ["flip", "fliplr", "flipud", "roll", "tril", "triu", "pad"]
