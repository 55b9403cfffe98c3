"""Worker threads for ``DataLoader(num_workers > 0)``.

A ``WorkerPool`` owns ``num_workers`` threads, each with its own command queue. Commands carry
the *epoch* they belong to; starting a new epoch (``reset``) drops the results and pending work
of the previous one. Results go into one dict guarded by a condition variable, keyed by batch
index (map-style datasets) or by ``(worker id, n)`` (iterable datasets, where every worker
iterates its own ``iter(dataset)``). The threads never reference the iterator that consumes
them, so deleting the iterator can shut them down.

A worker that raises stores the error as that batch's result and goes on with its next batch.
A thread stuck in user code can't be stopped: shutdown joins for a bounded time and abandons
it (it is a daemon thread), and what it stores later is dropped, its epoch being over or the
pool closed.
"""
from __future__ import annotations

import queue
import threading
import time
import traceback


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker thread."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id: int, num_workers: int, seed: int, dataset):  # noqa: A002
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker thread: its ``WorkerInfo``; elsewhere ``None``."""
    return getattr(_local, "info", None)


class WorkerError:
    """An exception caught in a worker, re-raised in the main thread by ``reraise``."""

    def __init__(self, exc: BaseException, worker_id: int, where: str):
        self.exc = exc
        self.worker_id = worker_id
        self.where = where
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        msg = (f"Caught {type(self.exc).__name__} in DataLoader worker thread {self.worker_id} "
               f"while loading {self.where}: {self.exc}\nOriginal traceback:\n{self.text}")
        try:
            err = type(self.exc)(msg)
        except Exception:  # an exception type whose constructor wants other arguments
            err = RuntimeError(msg)
        raise err from self.exc


class MapFetcher:
    """Builds one batch from a list of indices (or one sample from one index)."""

    def __init__(self, dataset, collate_fn, auto_collation: bool):
        self.dataset, self.collate_fn, self.auto = dataset, collate_fn, auto_collation

    def __call__(self, index):
        if self.auto:
            return self.collate_fn([self.dataset[i] for i in index])
        return self.collate_fn(self.dataset[index])


class IterFetcher:
    """Builds the next batch from an iterator over an IterableDataset."""

    def __init__(self, dataset, collate_fn, auto_collation: bool, batch_size, drop_last: bool):
        self.it = iter(dataset)
        self.collate_fn, self.auto = collate_fn, auto_collation
        self.batch_size, self.drop_last = batch_size, drop_last
        self.done = False

    def __call__(self):
        """The next batch; raises StopIteration when the stream is exhausted."""
        if self.done:
            raise StopIteration
        if not self.auto:
            try:
                return self.collate_fn(next(self.it))
            except StopIteration:
                self.done = True
                raise
        items = []
        for item in self.it:
            items.append(item)
            if len(items) == self.batch_size:
                break
        if len(items) < self.batch_size:
            self.done = True
            if not items or self.drop_last:
                raise StopIteration
        return self.collate_fn(items)


OK, ERR, END = "ok", "err", "end"

# Shutdown waits at most this long (in total) for the threads to finish the batches they are
# loading; threads still inside user code after that are abandoned (they are daemon threads).
JOIN_GRACE_S = 1.0


class _Worker:
    """One worker thread, its command queue, and since when it has been inside user code."""

    __slots__ = ("wid", "queue", "thread", "busy_since")

    def __init__(self, pool: WorkerPool, wid: int):
        self.wid = wid
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.busy_since: float | None = None
        self.thread = threading.Thread(target=_worker_loop, args=(pool, self),
                                       name=f"actorflow-dataloader-{wid}", daemon=True)


class WorkerPool:
    """``num_workers`` threads loading batches; see the module docstring.

    ``timeout`` (seconds, 0 = none) is the loader's: a thread that has been inside one call of
    user code for longer than that when a new epoch starts is taken as stuck and replaced.
    """

    def __init__(self, dataset, collate_fn, auto_collation: bool, batch_size, drop_last: bool,
                 num_workers: int, prefetch_factor: int, worker_init_fn, base_seed: int,
                 timeout: float = 0):
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.auto_collation = auto_collation
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.worker_init_fn = worker_init_fn
        self.base_seed = base_seed
        self.timeout = timeout
        self.cv = threading.Condition()
        self.closed = False
        self.epoch = 0
        self.results: dict = {}
        self.consumed = [0] * num_workers
        self.all_threads: set = set()  # every thread ever started, replaced ones included
        self.workers = [self._start(wid) for wid in range(num_workers)]

    def _start(self, wid: int) -> _Worker:
        w = _Worker(self, wid)
        self.all_threads.add(w.thread)
        w.thread.start()
        return w

    # -- main-thread side -----------------------------------------------------------------------
    def reset(self) -> int:
        """Start a new epoch: forget the previous one's results and work, replace threads stuck
        in the previous one's user code for longer than ``timeout``; returns the epoch."""
        with self.cv:
            self.epoch += 1
            self.results.clear()
            self.consumed = [0] * self.num_workers
            if self.timeout > 0:
                now = time.monotonic()
                for wid, w in enumerate(self.workers):
                    since = w.busy_since
                    if since is not None and now - since > self.timeout:
                        w.queue.put(None)  # it exits once (if ever) its call returns
                        self.workers[wid] = self._start(wid)
            self.cv.notify_all()
            return self.epoch

    def submit(self, worker_id: int, command: tuple) -> None:
        self.workers[worker_id].queue.put(command)

    def wait(self, key, epoch: int, deadline: float | None, what: str, worker_id: int):
        """Block until the result for ``key`` arrives, at most until ``deadline`` (a
        ``time.monotonic()`` value, None = no bound); returns ``(status, value)``. ``what``
        names the batch, loaded by ``worker_id``, in the timeout error."""
        with self.cv:
            while key not in self.results:
                if self.closed:
                    raise RuntimeError("DataLoader: the worker threads were shut down")
                if self.epoch != epoch:
                    raise RuntimeError("DataLoader: this iterator was superseded by a newer one "
                                       "over the same persistent workers")
                if deadline is None:
                    self.cv.wait()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    since = self.workers[worker_id].busy_since
                    busy = ("" if since is None else f"; it has been in user code (dataset, "
                            f"collate_fn) for {time.monotonic() - since:.1f} s")
                    raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds "
                                       f"waiting for {what} from worker thread {worker_id}"
                                       f"{busy}")
                self.cv.wait(left)
            return self.results.pop(key)

    def mark_consumed(self, worker_id: int) -> None:
        with self.cv:
            self.consumed[worker_id] += 1
            self.cv.notify_all()

    def shutdown(self) -> None:
        """Stop the threads; wait at most ``JOIN_GRACE_S`` in all (no longer than ``timeout``
        when one is set) for those finishing a batch, and abandon the rest: they are daemon
        threads, and whatever they produce later is dropped."""
        with self.cv:
            if self.closed:
                return
            self.closed = True
            self.results.clear()
            self.cv.notify_all()
        for w in self.workers:
            w.queue.put(None)
        if threading.current_thread() in self.all_threads:
            return  # called from a worker (garbage collection there): signal, don't wait
        grace = min(JOIN_GRACE_S, self.timeout) if self.timeout > 0 else JOIN_GRACE_S
        deadline = time.monotonic() + grace
        for w in self.workers:
            w.thread.join(max(0.0, deadline - time.monotonic()))

    # -- worker side ----------------------------------------------------------------------------
    def _store(self, epoch: int, key, result: tuple) -> None:
        with self.cv:
            if epoch == self.epoch and not self.closed:
                self.results[key] = result
                self.cv.notify_all()

    def _current(self, epoch: int) -> bool:
        with self.cv:
            return epoch == self.epoch and not self.closed


def _user_call(me: _Worker, fn, *args):
    """``fn(*args)``, with ``me.busy_since`` set while it runs (for stuck-thread detection)."""
    me.busy_since = time.monotonic()
    try:
        return fn(*args)
    finally:
        me.busy_since = None


def _worker_loop(pool: WorkerPool, me: _Worker) -> None:
    wid = me.wid
    _local.info = WorkerInfo(wid, pool.num_workers, pool.base_seed + wid, pool.dataset)
    init_error = None
    if pool.worker_init_fn is not None:
        try:
            _user_call(me, pool.worker_init_fn, wid)
        except BaseException as e:  # reported with every batch this worker owes
            init_error = WorkerError(e, wid, "worker_init_fn")
    fetch = MapFetcher(pool.dataset, pool.collate_fn, pool.auto_collation)
    while True:
        command = me.queue.get()
        if command is None:
            return
        kind, epoch, key, index = command
        if not pool._current(epoch):
            continue
        if kind == "map":
            if init_error is not None:
                pool._store(epoch, key, (ERR, init_error))
                continue
            try:
                result = (OK, _user_call(me, fetch, index))
            except BaseException as e:
                result = (ERR, WorkerError(e, wid, f"batch {key}"))
            pool._store(epoch, key, result)
        else:
            _iterate(pool, me, epoch, init_error)


def _iterate(pool: WorkerPool, me: _Worker, epoch: int, init_error) -> None:
    """One epoch over an IterableDataset, at most ``prefetch_factor`` batches ahead. A batch
    that raises is reported and the same iterator is asked for the next one, as without
    workers; a worker whose ``worker_init_fn`` or ``iter(dataset)`` failed reports that once
    and ends."""
    wid = me.wid
    if init_error is not None:
        pool._store(epoch, (wid, 0), (ERR, init_error))
        pool._store(epoch, (wid, 1), (END, None))
        return
    try:
        fetch = _user_call(me, IterFetcher, pool.dataset, pool.collate_fn, pool.auto_collation,
                           pool.batch_size, pool.drop_last)
    except BaseException as e:
        pool._store(epoch, (wid, 0), (ERR, WorkerError(e, wid, "iter(dataset)")))
        pool._store(epoch, (wid, 1), (END, None))
        return
    n = 0
    while True:
        with pool.cv:
            while (not pool.closed and pool.epoch == epoch
                   and n - pool.consumed[wid] >= pool.prefetch_factor):
                pool.cv.wait()
            if pool.closed or pool.epoch != epoch:
                return
        try:
            result = (OK, _user_call(me, fetch))
        except StopIteration:
            result = (END, None)
        except BaseException as e:
            result = (ERR, WorkerError(e, wid, f"batch {n} of worker {wid}"))
        pool._store(epoch, (wid, n), result)
        if result[0] == END:
            return
        n += 1
