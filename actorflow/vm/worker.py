"""Worker threads and streams.

A ``Worker`` is one daemon thread with a FIFO queue of instructions; it runs them in the order
they were issued, waiting first for dependencies on other workers. Worker 0 is the default;
workers 1..N come from a bounded pool of ids (``ACTORFLOW_VM_WORKER_THREAD_LIMIT``, default 16)
that ``flow.asyncs.Thread`` draws from. A worker's OS thread starts at its first instruction
and lives until interpreter exit, so ids returned to the pool reuse threads, never add them.

A ``Stream`` is (kind, worker): streams of every kind under one worker share its thread and
queue, so they are ordered by issue. Stream objects are cached per worker and kind.
"""
from __future__ import annotations

import threading
from collections import deque
from queue import SimpleQueue

from actorflow.settings import env_int

LIMIT_VAR = "ACTORFLOW_VM_WORKER_THREAD_LIMIT"
DEFAULT_LIMIT = 16
STREAM_KINDS = ("compute", "copy", "launch")
COMM_WORKER = "comm"  # the id of the pool's communication worker


class Stream:
    """An instruction stream of one kind on one worker (cached: one object per pair)."""

    __slots__ = ("kind", "worker")

    def __init__(self, kind: str, worker: "Worker"):
        self.kind = kind
        self.worker = worker

    def __repr__(self) -> str:
        return f"<Stream {self.kind} on worker {self.worker.id}>"


class Worker:
    """One worker thread and its instruction queue."""

    def __init__(self, wid: int, run):
        self.id = wid
        self.queue: SimpleQueue = SimpleQueue()
        self.issued = 0    # instructions put on its queue (changed under the issue lock)
        self.finished = 0  # ... that its thread completed (or launched, when deferred)
        # its queued instructions not known to be complete, oldest first (deferred ones stay
        # until finished), and the bytes they allocated: what back-pressure bounds. Pruned
        # from the left at each issue, so finished instructions are not kept.
        self.pending: deque = deque()
        self.pending_bytes = 0
        self.thread: threading.Thread | None = None
        self._run = run
        self.streams = {k: Stream(k, self) for k in STREAM_KINDS}
        self.compute = self.streams["compute"]

    def stream(self, kind: str) -> Stream:
        try:
            return self.streams[kind]
        except KeyError:
            raise ValueError(f"unknown stream kind {kind!r}; kinds: {', '.join(STREAM_KINDS)}") \
                from None

    def ensure_started(self) -> None:
        """Start the OS thread (called under the issue lock before the first put)."""
        if self.thread is None:
            t = threading.Thread(target=self._loop, name=f"actorflow-vm-worker-{self.id}",
                                 daemon=True)
            self.thread = t
            t.start()

    def idle(self) -> bool:
        """Nothing queued is left to run on its thread (deferred launches in flight count as
        run): an instruction run on the caller now is ordered as the worker would order it."""
        return self.issued == self.finished

    def _loop(self) -> None:
        q, run = self.queue, self._run
        while True:
            ins = q.get()
            if ins is None:
                return
            run(ins, self)

    def reset_after_fork(self) -> None:
        """In a forked child: no thread, an empty queue (the parent drained before forking)."""
        self.queue = SimpleQueue()
        self.pending.clear()
        self.pending_bytes = 0
        self.issued = self.finished = 0
        self.thread = None

    def stop(self, timeout: float) -> None:
        """Ask the thread to leave after what is queued, and join it."""
        t = self.thread
        if t is not None and t.is_alive():
            self.queue.put(None)
            t.join(timeout)

    def __repr__(self) -> str:
        return f"<Worker {self.id}: {self.issued - self.finished} queued>"


def worker_limit() -> int:
    """The pool size from ``ACTORFLOW_VM_WORKER_THREAD_LIMIT`` (read at each request)."""
    return env_int(LIMIT_VAR, DEFAULT_LIMIT, minimum=0)


class WorkerPool:
    """Worker 0 plus ids 1..limit handed out to ``flow.asyncs.Thread`` handles."""

    def __init__(self, run):
        self._run = run
        self._lock = threading.Lock()
        self._workers: dict[int, Worker] = {0: Worker(0, run)}
        self._in_use: set[int] = set()
        # every worker made so far, as a tuple replaced (under the lock) when one is added: the
        # sync points iterate it without the lock
        self.all: tuple = tuple(self._workers.values())

    @property
    def default(self) -> Worker:
        return self._workers[0]

    @property
    def comm(self) -> Worker:
        """The communication worker: collectives between processes run on its thread, so
        compute on the other workers overlaps with transfers (made on first use)."""
        w = self._workers.get(COMM_WORKER)
        if w is None:
            with self._lock:
                w = self._workers.setdefault(COMM_WORKER, Worker(COMM_WORKER, self._run))
                self.all = tuple(self._workers.values())
        return w

    def acquire(self) -> Worker:
        """A free worker id (the smallest); raises when all ``limit`` are taken."""
        limit = worker_limit()
        with self._lock:
            for wid in range(1, limit + 1):
                if wid not in self._in_use:
                    self._in_use.add(wid)
                    w = self._workers.get(wid)
                    if w is None:
                        w = self._workers[wid] = Worker(wid, self._run)
                        self.all = tuple(self._workers.values())
                    return w
        raise RuntimeError(
            f"flow.asyncs.Thread: all {limit} worker threads are in use ({LIMIT_VAR}={limit}); "
            f"drop a Thread you no longer need (its id returns to the pool when it is "
            f"garbage-collected) or raise {LIMIT_VAR}")

    def release(self, wid: int) -> None:
        """Return id ``wid`` to the pool (worker 0 is never released)."""
        if wid == 0:
            return
        with self._lock:
            self._in_use.discard(wid)

    def reset_after_fork(self) -> None:
        """In a forked child: fresh lock; every worker without a thread or queued work."""
        self._lock = threading.Lock()
        for w in self._workers.values():
            w.reset_after_fork()

    def in_use(self) -> set:
        with self._lock:
            return set(self._in_use)

    def workers(self) -> list:
        return list(self.all)
