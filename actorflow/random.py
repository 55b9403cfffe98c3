"""Reproducible randomness: one global generator hands each random op call a fresh seed.

Random ops carry that seed as the attr ``seed``; their kernels build a NumPy generator from it.
Eager calls and graph iterations draw seeds from the same stream in op order, so a model run
eagerly and as a Graph sees the same random numbers.
"""
from __future__ import annotations

import threading

import numpy as np

from actorflow.framework.device import as_device


class Generator:
    """A seedable source of per-op seeds (``actorflow.Generator``): ``Generator(device="cpu")``
    as in OneFlow and PyTorch (``"auto"`` is the CPU here), or ``Generator(seed)``."""

    def __init__(self, device="cpu", seed: int = 0):
        if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
            device, seed = "cpu", int(device)
        if device != "auto":
            as_device(device)  # raises for devices actorflow doesn't have
        self.device = "cpu"
        self._lock = threading.Lock()
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> "Generator":
        """Seed this generator with a seed in [-2**63, 2**64); a negative one counts modulo
        2**64 (as PyTorch's, so ``-1`` is ``2**64 - 1``)."""
        if not -2**63 <= int(seed) < 2**64:
            raise ValueError(f"manual_seed: seed must be in [-2**63, 2**64), got {seed}")
        with self._lock:
            self._initial = int(seed) % 2**64
            self._rng = np.random.Generator(np.random.PCG64(self._initial))
        return self

    def initial_seed(self) -> int:
        return self._initial

    def seed(self) -> int:
        """Re-seed from OS entropy and return the new seed."""
        s = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(s)
        return s

    def next_seed(self) -> int:
        """The seed for the next random op call."""
        with self._lock:
            return int(self._rng.integers(0, 2**63 - 1))

    # get_state() (the state as a uint8 tensor) is attached by functional/creation.py: tensors
    # sit above this module

    def state_array(self) -> np.ndarray:
        """The generator's state as uint8 values (``get_state``'s): the initial seed, then the
        PCG64 state (state, increment, cached 32-bit draw)."""
        with self._lock:
            st = self._rng.bit_generator.state
        raw = b"".join([self._initial.to_bytes(16, "little", signed=True),
                        st["state"]["state"].to_bytes(16, "little"),
                        st["state"]["inc"].to_bytes(16, "little"),
                        bytes([st["has_uint32"]]), st["uinteger"].to_bytes(4, "little")])
        return np.frombuffer(raw, dtype=np.uint8).copy()

    def set_state(self, state) -> None:
        """Restore a state from ``get_state`` (a uint8 tensor or array of its 53 bytes)."""
        raw = bytes(np.asarray(state, dtype=np.uint8).reshape(-1))
        if len(raw) != _STATE_BYTES:
            raise ValueError(f"set_state: expected {_STATE_BYTES} bytes of generator state, got "
                             f"{len(raw)}")
        bit = np.random.PCG64()
        bit.state = {"bit_generator": "PCG64",
                     "state": {"state": int.from_bytes(raw[16:32], "little"),
                               "inc": int.from_bytes(raw[32:48], "little")},
                     "has_uint32": raw[48], "uinteger": int.from_bytes(raw[49:53], "little")}
        with self._lock:
            self._initial = int.from_bytes(raw[:16], "little", signed=True)
            self._rng = np.random.Generator(bit)


_STATE_BYTES = 53
default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the global generator; every random op after this is reproducible."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    """The global generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(state) -> None:
    """Restore the global generator's state from ``get_rng_state``."""
    default_generator.set_state(state)


def numpy_rng(seed: int) -> np.random.Generator:
    """The NumPy generator a random kernel uses for the given op seed."""
    return np.random.Generator(np.random.Philox(seed))
