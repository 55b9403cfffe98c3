"""Buffer: a closable queue between the caller and the runtime (OneFlow's ``Buffer``).

``pull`` blocks until an item arrives or the buffer is closed; items pushed before ``close`` are
still handed out, after which ``pull`` reports ``CLOSED``. Every wait takes an optional timeout.
"""
from __future__ import annotations

import threading
from collections import deque
from enum import Enum


class BufferStatus(Enum):
    """Outcome of a buffer operation."""

    SUCCESS = 0
    CLOSED = 1
    EMPTY = 2


class Buffer:
    """A FIFO with ``push``, ``pull``, ``try_pull`` and ``close``; ``max_len`` bounds it (a push
    to a full buffer waits)."""

    def __init__(self, max_len: int | None = None, name: str = ""):
        self.name = name
        self._items: deque = deque()
        self._max = max_len
        self._closed = False
        self._cond = threading.Condition(threading.Lock())

    def push(self, item, timeout: float | None = None) -> BufferStatus:
        """Append ``item``; ``CLOSED`` if the buffer was closed (the item is dropped)."""
        with self._cond:
            if self._max is not None:
                ok = self._cond.wait_for(lambda: self._closed or len(self._items) < self._max,
                                         timeout)
                if not ok:
                    raise TimeoutError(f"buffer {self.name}: push timed out (full)")
            if self._closed:
                return BufferStatus.CLOSED
            self._items.append(item)
            self._cond.notify_all()
            return BufferStatus.SUCCESS

    def pull(self, timeout: float | None = None) -> tuple:
        """``(SUCCESS, item)``, or ``(CLOSED, None)`` once closed and drained. With a timeout,
        ``(EMPTY, None)`` if nothing came in time."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._items or self._closed, timeout)
            if self._items:
                item = self._items.popleft()
                self._cond.notify_all()
                return BufferStatus.SUCCESS, item
            if not ok:
                return BufferStatus.EMPTY, None
            return BufferStatus.CLOSED, None

    def try_pull(self) -> tuple:
        """Like ``pull`` without waiting: ``(EMPTY, None)`` when nothing is there."""
        with self._cond:
            if self._items:
                item = self._items.popleft()
                self._cond.notify_all()
                return BufferStatus.SUCCESS, item
            return (BufferStatus.CLOSED if self._closed else BufferStatus.EMPTY), None

    def close(self) -> None:
        """Refuse further pushes and wake every waiter."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return len(self._items)
