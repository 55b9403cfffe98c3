"""Devices. actorflow's kernels are NumPy, so ``cpu`` is the one device with data; ``meta``
tensors have a shape and a dtype only (ops on them run shape inference, no kernel).

As in PyTorch on a machine without a GPU, ``device("cuda")`` is a value that can be made,
printed and compared; putting a tensor, a module or a generator on it (``as_device``) raises."""
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
        if kind not in KNOWN_TYPES:
            raise RuntimeError(
                f"device: unknown device type {kind!r} in {spec!r}; expected one of "
                f"{', '.join(KNOWN_TYPES)}")
        if index is not None and index < 0:
            raise RuntimeError(f"device: the index must not be negative, got {spec!r}")
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


KNOWN_TYPES = ("cpu", "meta", "cuda")  # the types a device value may name
AVAILABLE_TYPES = ("cpu", "meta")  # the types a tensor may live on here

CPU = device("cpu")
META = device("meta")


def is_meta(d) -> bool:
    """True when ``d`` (a device, a device string or None) is the meta device."""
    return d is not None and device(d).type == "meta"


def as_device(d) -> device:
    """The device a tensor is to be put on: a device, a string or None (the CPU). Raises a
    RuntimeError naming the device when it is one actorflow has no kernels for (cuda)."""
    if d is None:
        return CPU
    dev = d if isinstance(d, device) else device(d)
    if dev.type not in AVAILABLE_TYPES:
        raise RuntimeError(
            f"device {str(dev)!r} is not available: actorflow runs its kernels on the CPU "
            f"(NumPy) only; use device('cpu') (or 'meta' for tensors without data)")
    return dev
