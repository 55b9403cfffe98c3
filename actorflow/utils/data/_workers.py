"""Worker threads for ``DataLoader(num_workers > 0)``.

A ``WorkerPool`` owns ``num_workers`` threads, each with its own command queue. Commands carry
the *epoch* they belong to; starting a new epoch (``reset``) drops the results and pending work
of the previous one. Results go into one dict guarded by a condition variable, keyed by batch
index (map-style datasets) or by ``(worker id, n)`` (iterable datasets, where every worker
iterates its own ``iter(dataset)``). The threads never reference the iterator that consumes
them, so deleting the iterator can shut them down.
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


class WorkerPool:
    """``num_workers`` threads loading batches; see the module docstring."""

    def __init__(self, dataset, collate_fn, auto_collation: bool, batch_size, drop_last: bool,
                 num_workers: int, prefetch_factor: int, worker_init_fn, base_seed: int):
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.auto_collation = auto_collation
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.cv = threading.Condition()
        self.closed = False
        self.epoch = 0
        self.results: dict = {}
        self.consumed = [0] * num_workers
        self.queues = [queue.SimpleQueue() for _ in range(num_workers)]
        self.threads = []
        for wid in range(num_workers):
            t = threading.Thread(target=_worker_loop,
                                 args=(self, wid, worker_init_fn, base_seed + wid),
                                 name=f"actorflow-dataloader-{wid}", daemon=True)
            t.start()
            self.threads.append(t)

    # -- main-thread side -----------------------------------------------------------------------
    def reset(self) -> int:
        """Start a new epoch: forget the previous one's results and work; returns its number."""
        with self.cv:
            self.epoch += 1
            self.results.clear()
            self.consumed = [0] * self.num_workers
            self.cv.notify_all()
            return self.epoch

    def submit(self, worker_id: int, command: tuple) -> None:
        self.queues[worker_id].put(command)

    def wait(self, key, epoch: int, timeout: float):
        """Block until the result for ``key`` arrives; returns ``(status, value)``."""
        deadline = time.monotonic() + timeout if timeout > 0 else None
        with self.cv:
            while key not in self.results:
                if self.closed:
                    raise RuntimeError("DataLoader: the worker threads were shut down")
                if self.epoch != epoch:
                    raise RuntimeError("DataLoader: this iterator was superseded by a newer one "
                                       "over the same persistent workers")
                if deadline is None:
                    self.cv.wait()
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise RuntimeError(f"DataLoader timed out after {timeout} seconds "
                                           f"waiting for batch {key}")
                    self.cv.wait(left)
            return self.results.pop(key)

    def mark_consumed(self, worker_id: int) -> None:
        with self.cv:
            self.consumed[worker_id] += 1
            self.cv.notify_all()

    def shutdown(self) -> None:
        """Stop the threads and wait for them (each finishes the batch it is loading)."""
        with self.cv:
            if self.closed:
                return
            self.closed = True
            self.results.clear()
            self.cv.notify_all()
        for q in self.queues:
            q.put(None)
        if threading.current_thread() in self.threads:
            return  # called from a worker (garbage collection there): signal, don't wait
        for t in self.threads:
            t.join()

    # -- worker side ----------------------------------------------------------------------------
    def _store(self, epoch: int, key, result: tuple) -> None:
        with self.cv:
            if epoch == self.epoch and not self.closed:
                self.results[key] = result
                self.cv.notify_all()

    def _current(self, epoch: int) -> bool:
        with self.cv:
            return epoch == self.epoch and not self.closed


def _worker_loop(pool: WorkerPool, wid: int, init_fn, seed: int) -> None:
    _local.info = WorkerInfo(wid, pool.num_workers, seed, pool.dataset)
    init_error = None
    if init_fn is not None:
        try:
            init_fn(wid)
        except BaseException as e:  # reported with the first batch this worker owes
            init_error = WorkerError(e, wid, "worker_init_fn")
    fetch = MapFetcher(pool.dataset, pool.collate_fn, pool.auto_collation)
    while True:
        command = pool.queues[wid].get()
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
                result = (OK, fetch(index))
            except BaseException as e:
                result = (ERR, WorkerError(e, wid, f"batch {key}"))
            pool._store(epoch, key, result)
        else:
            _iterate(pool, wid, epoch, init_error)


def _iterate(pool: WorkerPool, wid: int, epoch: int, init_error) -> None:
    """One epoch over an IterableDataset, at most ``prefetch_factor`` batches ahead."""
    if init_error is not None:
        pool._store(epoch, (wid, 0), (ERR, init_error))
        return
    try:
        fetch = IterFetcher(pool.dataset, pool.collate_fn, pool.auto_collation,
                            pool.batch_size, pool.drop_last)
    except BaseException as e:
        pool._store(epoch, (wid, 0), (ERR, WorkerError(e, wid, "iter(dataset)")))
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
            result = (OK, fetch())
        except StopIteration:
            result = (END, None)
        except BaseException as e:
            result = (ERR, WorkerError(e, wid, f"batch {n} of worker {wid}"))
        pool._store(epoch, (wid, n), result)
        if result[0] != OK:
            return
        n += 1
