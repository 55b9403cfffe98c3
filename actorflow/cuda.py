"""``actorflow.cuda``: the CUDA queries of OneFlow/PyTorch, answered for a CPU-only build.

Code written for both devices asks ``flow.cuda.is_available()`` before using a GPU; here there
is none, so the answer is False and the device count 0. Seeding the (absent) CUDA generators
does nothing, as in PyTorch without CUDA. Everything that needs a device (the current device,
its properties, synchronising it, its generator's state, the ``cuda.*Tensor`` types) raises an
error saying there is none, as PyTorch does without a GPU.
"""
from __future__ import annotations

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "empty_cache"]


def is_available() -> bool:
    """Whether a CUDA device can be used: never, actorflow runs on the CPU."""
    return False


def device_count() -> int:
    """The number of CUDA devices: 0."""
    return 0


def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's generator: there is none, so nothing happens."""


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's generator: there are none, so nothing happens."""


def empty_cache() -> None:
    """Release cached CUDA memory: there is none."""


def _no_device(what: str) -> RuntimeError:
    return RuntimeError(f"actorflow.cuda.{what}: no CUDA device is available (actorflow runs on "
                        f"the CPU only; flow.cuda.is_available() is False)")


def current_device() -> int:
    """The index of the current CUDA device: raises, there is none."""
    raise _no_device("current_device")


def set_device(device) -> None:
    """Select the current CUDA device: raises, there is none."""
    raise _no_device("set_device")


def synchronize(device=None) -> None:
    """Wait for a CUDA device's work: raises, there is no CUDA device (``flow.synchronize()``
    waits for the CPU's eager work)."""
    raise _no_device("synchronize")


def get_device_properties(device=None):
    """A CUDA device's properties: raises, there is none."""
    raise _no_device("get_device_properties")


def get_device_capability(device=None) -> tuple:
    """A CUDA device's compute capability: raises, there is none."""
    raise _no_device("get_device_capability")


def get_device_name(device=None) -> str:
    """A CUDA device's name: raises, there is none."""
    raise _no_device("get_device_name")


def get_rng_state(device="cuda"):
    """A CUDA device's generator state: raises, there is no CUDA device."""
    raise _no_device("get_rng_state")


def get_rng_state_all() -> list:
    """One generator state per CUDA device: an empty list, there are none (as PyTorch)."""
    return []


def set_rng_state(new_state, device="cuda") -> None:
    """Set a CUDA device's generator state: raises, there is no CUDA device."""
    raise _no_device("set_rng_state")


def set_rng_state_all(new_states) -> None:
    """Set each CUDA device's generator state: one state per device, so only an empty list is
    accepted (and changes nothing); any state raises, there is no device to take it."""
    if len(list(new_states)):
        raise _no_device("set_rng_state_all")


class _CudaTensorType(type):
    """A ``flow.cuda.*Tensor`` class: no tensor is ever one, and constructing one raises."""

    def __instancecheck__(cls, obj) -> bool:
        return False

    def __call__(cls, *args, **kwargs):
        raise TypeError(f"type actorflow.cuda.{cls.__name__} not available: no CUDA device "
                        f"(actorflow runs on the CPU only; use flow.{cls.__name__})")


def _cuda_type(name: str):
    return _CudaTensorType(name, (), {"__doc__": f"CUDA {name}: unavailable on the CPU."})


HalfTensor = _cuda_type("HalfTensor")
FloatTensor = _cuda_type("FloatTensor")
DoubleTensor = _cuda_type("DoubleTensor")
BoolTensor = _cuda_type("BoolTensor")
ByteTensor = _cuda_type("ByteTensor")
CharTensor = _cuda_type("CharTensor")
IntTensor = _cuda_type("IntTensor")
LongTensor = _cuda_type("LongTensor")

__all__ += ["current_device", "set_device", "synchronize", "get_device_properties",
            "get_device_capability", "get_device_name", "get_rng_state", "get_rng_state_all",
            "set_rng_state", "set_rng_state_all", "HalfTensor", "FloatTensor", "DoubleTensor",
            "BoolTensor", "ByteTensor", "CharTensor", "IntTensor", "LongTensor"]
