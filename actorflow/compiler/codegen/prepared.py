"""What a generated kernel worked out for a call's arrays (views, chunks, buffers, C pointer
arrays), found again for the next call on the same arrays (``rows.py``, ``reduce.py``).

A graph calls a task's kernel on the same register arrays every step, but the views it reads
them through (a transpose, a slice of a register) are new objects each act. So a call is
looked up first by its arrays' ids (checked to be those very objects), then by their
addresses, shapes, strides and dtypes: new objects of the same memory and layout find what the
first call prepared. An entry holds the arrays it was prepared for, so that memory stays theirs
while the entry stands for it (no other array can take the address), and what it keeps -
views of those arrays included - reads what the new arrays would. Each table keeps at most
``LIMIT`` entries (a graph's task has one or two layouts: its registers may alternate) and is
emptied when full.
"""
from __future__ import annotations

from operator import is_

import numpy as np

LIMIT = 8


class PreparedCalls:
    """A kernel's prepared calls, by their arrays (see the module docstring)."""

    def __init__(self):
        self.by_ids: dict = {}     # ids of the arrays -> (the arrays, prepared)
        self.by_layout: dict = {}  # addresses and layouts -> (the arrays, prepared)
        # an address costs microseconds: the key parts of arrays the last lookup had too
        # (most registers; only the views are new objects) are taken from its key
        self._last: tuple = ((), ())

    def get(self, arrays: list):
        """What was prepared for ``arrays`` (the same objects, or new ones of the same memory
        and layout), or None."""
        ids = tuple(map(id, arrays))
        hit = self.by_ids.get(ids)
        if hit is not None and all(map(is_, hit[0], arrays)):
            return hit[1]
        key = self._key(arrays)
        hit = self.by_layout.get(key) if key is not None else None
        if hit is None:
            return None
        self._put(self.by_ids, ids, arrays, hit[1])
        return hit[1]

    def put(self, arrays: list, prepared) -> None:
        """Remember ``prepared`` for ``arrays``."""
        self._put(self.by_ids, tuple(map(id, arrays)), arrays, prepared)
        key = self._key(arrays)
        if key is not None:
            self._put(self.by_layout, key, arrays, prepared)

    def values(self) -> list:
        """What is prepared, once per distinct call (for tests and tools)."""
        seen, out = set(), []
        for _, p in list(self.by_ids.values()) + list(self.by_layout.values()):
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
        return out

    def _key(self, arrays: list) -> tuple | None:
        if not all(isinstance(a, np.ndarray) for a in arrays):  # a NumPy scalar: no memory
            return None
        last, last_key = self._last
        key = tuple(last_key[i] if i < len(last) and a is last[i] else
                    (a.ctypes.data, a.shape, a.strides, a.dtype) for i, a in enumerate(arrays))
        self._last = (tuple(arrays), key)
        return key

    @staticmethod
    def _put(table: dict, key, arrays: list, prepared) -> None:
        if len(table) >= LIMIT:
            table.clear()
        table[key] = (tuple(arrays), prepared)


__all__ = ["PreparedCalls", "LIMIT"]
