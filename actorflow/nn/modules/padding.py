"""Padding layers: constant, zero, reflection, replication and circular padding of the last
1, 2 or 3 dims (all through ``F.pad``)."""
from __future__ import annotations

from actorflow.nn import functional as F
from actorflow.nn.module import Module
from actorflow.tensor import Tensor


def _pairs(padding, n: int, name: str) -> tuple:
    """``padding`` as 2n widths; checked by ``F.pad`` when the layer runs (as in PyTorch)."""
    if isinstance(padding, (tuple, list)):
        if len(padding) != 2 * n:
            raise ValueError(f"{name}: padding needs {2 * n} values, got {tuple(padding)}")
        return tuple(padding)
    return (padding,) * (2 * n)


class _PadNd(Module):
    _n = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _pairs(padding, self._n, type(self).__name__)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float = 0.0) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with ``value``."""

    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dims with ``value``."""

    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dims with ``value``."""

    _n = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)


def _mode_classes(mode: str, title: str) -> dict:
    out = {}
    for n in (1, 2, 3):
        name = f"{title}Pad{n}d"
        out[name] = type(name, (_PadNd,), {
            "_n": n, "_mode": mode, "__module__": __name__,
            "__doc__": f"Pad the last {n} dim(s) by {mode} padding."})
    return out


_classes = {**_mode_classes("reflect", "Reflection"), **_mode_classes("replicate", "Replication"),
            **_mode_classes("circular", "Circular")}
ReflectionPad1d = _classes["ReflectionPad1d"]
ReflectionPad2d = _classes["ReflectionPad2d"]
ReflectionPad3d = _classes["ReflectionPad3d"]
ReplicationPad1d = _classes["ReplicationPad1d"]
ReplicationPad2d = _classes["ReplicationPad2d"]
ReplicationPad3d = _classes["ReplicationPad3d"]
CircularPad1d = _classes["CircularPad1d"]
CircularPad2d = _classes["CircularPad2d"]
CircularPad3d = _classes["CircularPad3d"]

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]
