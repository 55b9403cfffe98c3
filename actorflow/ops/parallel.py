"""Intra-op parallelism: a kernel's independent blocks run on the calling thread and helpers.

NumPy releases the GIL inside its loops, so a kernel whose work splits into independent
blocks (rows of a normalisation, slices of attention's batch, runs of an elementwise array)
can use more than one core: ``parallel_for(n, fn)`` calls ``fn(i)`` for every block index
``i < n`` on the calling thread and on up to ``threads() - 1`` helper threads.

Blocks are claimed one at a time from a shared counter, not dealt out in advance: if a helper
is slow to start or loses its core (to the caller's Python, say, while the VM runs kernels
asynchronously), the calling thread simply claims more blocks, so a call never waits for a
straggler's share of the work and never takes much longer than running it alone. The call
returns when every block has run; the first exception raised by a block is re-raised there.

``ACTORFLOW_INTRA_OP_THREADS`` sets the thread count (default: the CPUs this process may run
on); 1 turns helpers off. Helper threads start at the first parallel call and are daemons.

GEMMs are left to BLAS's own threads: on the 2-core machine, splitting them over this pool
(with BLAS pinned to one thread) measured no faster than BLAS alone, whose FMA-bound work does
not scale across the two cores here the way elementwise kernels do.
"""
from __future__ import annotations

import itertools
import os
import threading
from _thread import allocate_lock
from queue import SimpleQueue
from typing import Callable

from actorflow.settings import env_int

THREADS_VAR = "ACTORFLOW_INTRA_OP_THREADS"


def _default_threads() -> int:
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = max(1, os.cpu_count() or 1)
    return env_int(THREADS_VAR, cpus, minimum=1)


class _Task:
    """One ``parallel_for`` call: the block function, the claim counter and completion."""

    __slots__ = ("fn", "n", "claims", "done", "lock", "finished", "error")

    def __init__(self, fn: Callable[[int], None], n: int):
        self.fn, self.n = fn, n
        self.claims = itertools.count()  # next() is atomic under the GIL
        self.done = 0
        self.lock = threading.Lock()
        self.finished = allocate_lock()  # released by whoever completes the last block
        self.finished.acquire()
        self.error: BaseException | None = None

    def work(self) -> None:
        """Claim and run blocks until none is left."""
        ran = 0
        fn, n = self.fn, self.n
        for i in self.claims:
            if i >= n:
                break
            try:
                fn(i)
            except BaseException as e:  # kept for the caller, the other blocks still run
                if self.error is None:
                    self.error = e
            ran += 1
        if ran:
            with self.lock:
                self.done += ran
                last = self.done == n
            if last:
                self.finished.release()


class _Pool:
    """Helper threads taking tasks from one queue."""

    def __init__(self):
        self.threads = _default_threads()
        self.queue: SimpleQueue = SimpleQueue()
        self.helpers: list = []
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            while len(self.helpers) < self.threads - 1:
                t = threading.Thread(target=self._loop, daemon=True,
                                     name=f"actorflow-intra-op-{len(self.helpers) + 1}")
                self.helpers.append(t)
                t.start()

    def _loop(self) -> None:
        q = self.queue
        while True:
            task = q.get()
            if task is None:
                return
            task.work()

    def run(self, n: int, fn: Callable[[int], None]) -> None:
        helpers = min(self.threads - 1, n - 1)
        if helpers <= 0:
            for i in range(n):
                fn(i)
            return
        if len(self.helpers) < self.threads - 1:
            self._start()
        task = _Task(fn, n)
        for _ in range(helpers):
            self.queue.put(task)
        task.work()
        task.finished.acquire()
        if task.error is not None:
            raise task.error

    def reset_after_fork(self) -> None:
        self.queue = SimpleQueue()
        self.helpers = []
        self._lock = threading.Lock()


_pool = _Pool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.reset_after_fork)


def threads() -> int:
    """How many threads (the caller and its helpers) a parallel kernel may use."""
    return _pool.threads


def set_threads(n: int) -> None:
    """Use at most ``n`` threads per parallel kernel from now on (1: no helpers)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"intra-op thread count must be a positive integer, got {n!r}")
    _pool.threads = n
    extra = len(_pool.helpers) - (n - 1)
    if extra > 0:  # helpers beyond the new count leave after what is queued
        for _ in range(extra):
            _pool.queue.put(None)
        _pool.helpers = _pool.helpers[:n - 1]


def parallel_for(n: int, fn: Callable[[int], None]) -> None:
    """Call ``fn(i)`` for ``i`` in ``range(n)``, spread over the intra-op threads; returns when
    all have run. Blocks must be independent (they may run in any order, concurrently)."""
    if n <= 1:
        if n == 1:
            fn(0)
        return
    _pool.run(n, fn)


def split(total: int, min_size: int) -> list:
    """``(start, stop)`` ranges covering ``range(total)``: about two per thread, each at least
    ``min_size`` long (one range when ``total`` is small)."""
    if total <= 0:
        return []
    parts = max(1, min(2 * threads(), total // max(1, min_size)))
    step = -(-total // parts)
    return [(i, min(i + step, total)) for i in range(0, total, step)]

