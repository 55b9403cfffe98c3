"""``DataLoader``: iterate over a dataset in batches, optionally loaded ahead by worker
threads (threads, not processes: NumPy releases the GIL in its loops, and nothing has to be
pickled)."""
from __future__ import annotations

import math
import numbers
import time
from typing import Callable

from actorflow.random import default_generator
from actorflow.utils.data._workers import END, ERR, IterFetcher, MapFetcher, WorkerPool
from actorflow.utils.data.collate import default_collate, default_convert
from actorflow.utils.data.dataset import Dataset, IterableDataset
from actorflow.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


class DataLoader:
    """Batches of samples from ``dataset``.

    Map-style datasets are visited in the order of ``sampler`` (sequential, or random with
    ``shuffle=True``, reproducible with ``actorflow.manual_seed`` or ``generator``) and grouped
    by ``batch_size``/``drop_last`` (or by a ``batch_sampler``); ``collate_fn`` merges each
    batch. ``num_workers > 0`` loads batches in that many threads, at most
    ``prefetch_factor * num_workers`` batches ahead, and yields them in order. A batch that
    raises re-raises its error (naming the batch and worker) in its turn; iterating on goes on
    with the next batch, as without workers. ``timeout > 0`` (only with workers) bounds each
    wait for a batch: it raises ``RuntimeError`` and the same batch can be waited for again.
    Ending an iterator waits at most about a second for its threads; threads stuck in user
    code are abandoned (daemon threads; their late results are dropped), and persistent
    workers replace one stuck for longer than ``timeout`` when the next epoch starts.
    ``pin_memory`` is accepted and ignored (there is no accelerator).
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Sampler | None = None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 generator=None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers should be a non-negative integer, got "
                             f"{num_workers!r}")
        if not isinstance(timeout, numbers.Real) or not 0 <= timeout < math.inf:
            raise ValueError(f"DataLoader: timeout should be a non-negative number of seconds "
                             f"(0 = no timeout), got {timeout!r}")
        if num_workers == 0 and timeout > 0:
            raise ValueError("DataLoader: timeout needs num_workers > 0 (without workers the "
                             "batch is loaded in the calling thread, which can't be bounded)")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor is only used with num_workers > 0")
        if num_workers == 0 and persistent_workers:
            raise ValueError("DataLoader: persistent_workers needs num_workers > 0")
        prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
        if prefetch_factor < 1:
            raise ValueError(f"DataLoader: prefetch_factor should be >= 1, got {prefetch_factor}")
        if isinstance(dataset, IterableDataset):
            if shuffle:
                raise ValueError("DataLoader: shuffle is not supported with an IterableDataset "
                                 "(it defines its own order)")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: sampler and batch_sampler are not supported with "
                                 "an IterableDataset")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle are mutually exclusive")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler is mutually exclusive with "
                                 "batch_size, shuffle, sampler and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None (no batching) can't be combined with "
                             "drop_last")
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = float(timeout)
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._pool = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None or (
            isinstance(self.dataset, IterableDataset) and self.batch_size is not None)

    @property
    def _index_sampler(self):
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no length
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)

    def __iter__(self):
        # drawn with or without workers, so a seeded shuffle is the same either way
        base_seed = (self.generator or default_generator).next_seed() % (2 ** 62)
        if self.num_workers == 0:
            return _SingleThreadIter(self)
        if self.persistent_workers:
            if self._pool is None:
                self._pool = self._new_pool(base_seed)
            return _WorkerIter(self, self._pool, owns_pool=False)
        return _WorkerIter(self, self._new_pool(base_seed), owns_pool=True)

    def _new_pool(self, base_seed: int) -> WorkerPool:
        return WorkerPool(self.dataset, self.collate_fn, self._auto_collation, self.batch_size,
                          self.drop_last, self.num_workers, self.prefetch_factor,
                          self.worker_init_fn, base_seed, self.timeout)

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown()


class _SingleThreadIter:
    """Loads each batch in the calling thread when it is asked for."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        if isinstance(loader.dataset, IterableDataset):
            fetch = IterFetcher(loader.dataset, loader.collate_fn, loader._auto_collation,
                                loader.batch_size, loader.drop_last)
            self._next = fetch
        else:
            fetch = MapFetcher(loader.dataset, loader.collate_fn, loader._auto_collation)
            indices = iter(loader._index_sampler)
            self._next = lambda: fetch(next(indices))

    def __iter__(self):
        return self

    def __next__(self):
        return self._next()

    def __len__(self) -> int:
        return len(self._loader)


class _WorkerIter:
    """Batches loaded ahead by a WorkerPool, yielded in order.

    Map-style: batch ``i`` goes to worker ``i % num_workers``; at most
    ``prefetch_factor * num_workers`` batches are outstanding. Iterable: each worker iterates
    the dataset and the batches are taken from the workers in turn. An error (from a worker,
    or from the sampler in this thread) is raised in the batch's turn and leaves the iterator
    usable, as does a timeout (which consumes nothing). The pool is shut down when the
    iterator is exhausted or deleted (unless it belongs to persistent workers).
    """

    def __init__(self, loader: DataLoader, pool: WorkerPool, owns_pool: bool):
        self._pool = pool
        self._owns_pool = owns_pool
        self._timeout = loader.timeout
        self._loader = loader
        self._n = loader.num_workers
        self._iterable = isinstance(loader.dataset, IterableDataset)
        try:
            self._epoch = pool.reset()
            if self._iterable:
                self._live = list(range(self._n))
                self._turn = 0
                self._taken = [0] * self._n
                for w in range(self._n):
                    pool.submit(w, ("iter", self._epoch, None, None))
            else:
                self._sent = 0
                self._received = 0
                self._sampler_done = False
                self._sampler_errors: dict = {}
                self._indices = iter(loader._index_sampler)
                for _ in range(loader.prefetch_factor * self._n):
                    self._dispatch()
        except BaseException:
            self._close()
            raise

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def _dispatch(self) -> None:
        if self._sampler_done:
            return
        try:
            index = next(self._indices)
        except StopIteration:
            self._sampler_done = True
            return
        except Exception as e:  # raised in its turn, as without workers; the sampler goes on
            self._sampler_errors[self._sent] = e
        else:
            self._pool.submit(self._sent % self._n, ("map", self._epoch, self._sent, index))
        self._sent += 1

    def __next__(self):
        if self._pool is None:
            raise StopIteration
        status, value = self._next_iterable() if self._iterable else self._next_map()
        if status == END:
            self._close()
            raise StopIteration
        if status == ERR:
            value.reraise()
        return value

    def _deadline(self) -> float | None:
        return time.monotonic() + self._timeout if self._timeout > 0 else None

    def _next_map(self) -> tuple:
        if self._received == self._sent:
            return END, None
        i = self._received
        error = self._sampler_errors.pop(i, None)
        if error is None:
            result = self._pool.wait(i, self._epoch, self._deadline(), f"batch {i}", i % self._n)
        self._received += 1
        self._dispatch()
        if error is not None:
            raise error
        return result

    def _next_iterable(self) -> tuple:
        deadline = self._deadline()  # one bound for the whole wait, over every worker asked
        while self._live:
            self._turn %= len(self._live)
            w = self._live[self._turn]
            n = self._taken[w]
            result = self._pool.wait((w, n), self._epoch, deadline, f"batch {n} of worker {w}",
                                     w)
            self._taken[w] += 1
            self._pool.mark_consumed(w)
            if result[0] == END:
                self._live.pop(self._turn)
                continue
            self._turn += 1
            return result
        return END, None

    def _close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            pool.shutdown()

    def __del__(self):
        self._close()


__all__ = ["DataLoader"]
