"""Devices. actorflow's kernels are NumPy, so ``cpu`` is the one device with data; ``meta``
tensors have a shape and a dtype only (ops on them run shape inference, no kernel)."""
from __future__ import annotations


class device:
    """A device such as ``actorflow.device("cpu")`` or ``actorflow.device("cpu:0")``."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index: int | None = None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string like 'cpu', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if idx:
            index = int(idx)
        if kind not in ("cpu", "meta"):
            raise RuntimeError(
                f"device {spec!r} is not available: actorflow runs its kernels on the CPU "
                f"(NumPy) only; use device('cpu') (or 'meta' for tensors without data)")
        self.type = kind
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return isinstance(other, device) and self.type == other.type

    def __hash__(self) -> int:
        return hash(self.type)

    def __repr__(self) -> str:
        return f"device(type='{self.type}', index={self.index or 0})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")
META = device("meta")


def is_meta(d) -> bool:
    """True when ``d`` (a device, a device string or None) is the meta device."""
    return d is not None and as_device(d).type == "meta"


def as_device(d) -> device:
    """Accept a device, a string or None (the CPU)."""
    if d is None:
        return CPU
    if isinstance(d, device):
        return d
    return device(d)
