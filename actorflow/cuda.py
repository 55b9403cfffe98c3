"""``flow.cuda``: what a CPU-only build answers about CUDA (no devices, nothing to seed)."""
from __future__ import annotations


def is_available() -> bool:
    """False: actorflow runs its kernels on the CPU (NumPy) only."""
    return False


def device_count() -> int:
    """The number of CUDA devices: 0."""
    return 0


def _no_device(what: str):
    raise RuntimeError(f"flow.cuda.{what}: no CUDA device (actorflow runs its kernels on the "
                       "CPU only)")


def current_device() -> int:
    """Raises: there is no CUDA device."""
    _no_device("current_device")


def get_device_capability(device=None) -> tuple:
    """Raises: there is no CUDA device."""
    _no_device("get_device_capability")


def get_device_name(device=None) -> str:
    """Raises: there is no CUDA device."""
    _no_device("get_device_name")


def manual_seed(seed: int) -> None:
    """Seeds the CUDA generators: none exist, so nothing happens (as in PyTorch)."""


def manual_seed_all(seed: int) -> None:
    """Seeds every CUDA generator: none exist, so nothing happens (as in PyTorch)."""


def synchronize(device=None) -> None:
    """Nothing to wait for without a CUDA device."""


def empty_cache() -> None:
    """No CUDA memory is held."""


__all__ = ["is_available", "device_count", "current_device", "get_device_capability",
           "get_device_name", "manual_seed", "manual_seed_all", "synchronize", "empty_cache"]
