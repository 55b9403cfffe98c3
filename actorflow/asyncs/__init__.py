"""User-selectable worker threads (``flow.asyncs``), as in OneFlow.

    t = flow.asyncs.Thread()          # a worker from the VM's bounded pool
    with flow.asyncs.thread(t):       # ops issued here, on this Python thread, run on t
        y = model(x)

``Thread()`` takes a worker id from a pool of ``ACTORFLOW_VM_WORKER_THREAD_LIMIT`` (default 16)
besides the default worker 0; when the handle is garbage-collected its id returns to the pool
and the next ``Thread()`` reuses it (and its OS thread). Ops under different workers are
ordered only by their data dependencies; ops under one worker run in issue order.
"""
from __future__ import annotations

import functools

from actorflow import vm


class Thread:
    """A handle on one VM worker thread from the bounded pool (``flow.asyncs.Thread``)."""

    __slots__ = ("_worker", "__weakref__")

    def __init__(self):
        self._worker = vm.pool().acquire()

    @property
    def worker_id(self) -> int:
        """The worker's id (1..limit); 0 is the default worker, never handed out."""
        return self._worker.id

    def __del__(self):
        w = getattr(self, "_worker", None)
        if w is not None:
            try:
                vm.pool().release(w.id)
            except Exception:  # interpreter shutdown: the pool is going away anyway
                pass

    def __repr__(self) -> str:
        return f"actorflow.asyncs.Thread(worker_id={self._worker.id})"


class thread:
    """Context manager (and decorator) making ops issued in its block, on the current Python
    thread only, run on ``worker_thread``'s worker. Nests; other Python threads are unaffected.
    """

    __slots__ = ("_thread",)

    def __init__(self, worker_thread: Thread):
        if not isinstance(worker_thread, Thread):
            raise TypeError(f"flow.asyncs.thread: expected a flow.asyncs.Thread, got "
                            f"{type(worker_thread).__name__}")
        self._thread = worker_thread

    def __enter__(self) -> Thread:
        vm.push_worker(self._thread._worker)
        return self._thread

    def __exit__(self, *exc) -> bool:
        vm.pop_worker()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped


__all__ = ["Thread", "thread"]
