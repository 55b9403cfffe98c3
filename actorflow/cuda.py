"""``actorflow.cuda``: the CUDA queries of OneFlow/PyTorch, answered for a CPU-only build.

Code written for both devices asks ``flow.cuda.is_available()`` before using a GPU; here there
is none, so the answer is False and the device count 0. Seeding the (absent) CUDA generators
does nothing, as in PyTorch without CUDA.
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
