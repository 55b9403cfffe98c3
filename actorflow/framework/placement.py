"""Placement: where a global tensor lives (OneFlow's ``flow.placement``; how it is laid out
over the ranks, its SBP, is ``actorflow.framework.sbp_parallel``).

A ``placement`` is a device type and a list of ranks (nested lists give a hierarchy, e.g.
``[[0, 1], [2, 3]]``, kept with its shape; a global tensor then has one SBP per hierarchy
axis). As in OneFlow, the ranks are kept sorted (``placement("cpu", [1, 0])`` is
``placement("cpu", [0, 1])``) and ``ranks`` is a NumPy int64 array of the hierarchy's shape.
"""
from __future__ import annotations

import numpy as np

from actorflow.process.world import world

DEVICE_TYPES = ("cpu",)
PLACEMENT_TYPES = DEVICE_TYPES + ("meta",)  # "meta": global tensors without data


def _world_size() -> int:
    return world().size


class placement:  # noqa: N801  (OneFlow's name)
    """A device type and the ranks a global tensor lives on: ``placement("cpu", [0, 1])``."""

    __slots__ = ("_type", "_ranks", "_hierarchy", "_flat")

    def __init__(self, type: str = "cpu", ranks=None):  # noqa: A002  (OneFlow's keyword)
        if not isinstance(type, str) or type not in PLACEMENT_TYPES:
            raise ValueError(f"placement: device type must be one of {PLACEMENT_TYPES}, got "
                             f"{type!r} (this build runs on CPUs only)")
        if ranks is None:
            raise TypeError("placement: ranks is required (a list of ranks, e.g. [0, 1])")
        if isinstance(ranks, int) and not isinstance(ranks, bool):
            ranks = [ranks]
        if isinstance(ranks, range):
            ranks = list(ranks)
        try:
            arr = np.array(ranks, dtype=object)
        except ValueError:
            arr = None
        if arr is None or arr.ndim == 0 or arr.size == 0 or not all(
                isinstance(r, (int, np.integer)) and not isinstance(r, bool)
                for r in arr.reshape(-1)):
            raise ValueError(f"placement: ranks must be a non-empty (nested) list of ints "
                             f"of a rectangular shape, got {ranks!r}")
        flat = tuple(int(r) for r in arr.reshape(-1))
        if len(set(flat)) != len(flat):
            raise ValueError(f"placement: ranks must be distinct, got {ranks!r}")
        size = _world_size()
        bad = [r for r in flat if not 0 <= r < size]
        if bad:
            raise ValueError(f"placement: rank {bad[0]} is not in 0..{size - 1} (the world "
                             f"has {size} process{'es' if size > 1 else ''})")
        self._type = type
        self._hierarchy = tuple(int(d) for d in arr.shape)
        self._flat = tuple(sorted(flat))  # OneFlow orders a placement's ranks
        self._ranks = np.array(self._flat, dtype=np.int64).reshape(self._hierarchy)
        self._ranks.flags.writeable = False

    @classmethod
    def all(cls, device_type: str = "cpu") -> "placement":
        """Every rank of the program: ``placement(device_type, range(world size))``."""
        return cls(device_type, list(range(_world_size())))

    @property
    def type(self) -> str:
        """The device type (``"cpu"``)."""
        return self._type

    @property
    def ranks(self) -> np.ndarray:
        """The ranks as a NumPy int64 array of the hierarchy's shape (sorted, as OneFlow's)."""
        return self._ranks.copy()

    @property
    def hierarchy(self) -> tuple:
        """The shape of the rank array (``(n,)`` for a 1-D placement)."""
        return self._hierarchy

    @property
    def flat_ranks(self) -> tuple:
        """The ranks in order, flattened."""
        return self._flat

    def index(self, rank: int) -> int | None:
        """Position of ``rank`` among the flattened ranks, or None when it is not one."""
        try:
            return self._flat.index(rank)
        except ValueError:
            return None

    def __eq__(self, other) -> bool:
        return (isinstance(other, placement) and self._type == other._type
                and self._flat == other._flat and self._hierarchy == other._hierarchy)

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self._type, self._flat, self._hierarchy))

    def __repr__(self) -> str:
        return f'actorflow.placement(type="{self._type}", ranks={self._ranks.tolist()})'

    __str__ = __repr__
