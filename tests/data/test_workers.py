"""DataLoader worker threads: errors leave the epoch going on, timeouts bound every wait, and
nothing (shutdown, interpreter exit, a later epoch) waits on or hears from a stuck thread."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import REPO_ROOT
from actorflow.utils.data import DataLoader, Dataset, IterableDataset, Sampler, get_worker_info

ROOT = REPO_ROOT
N = 16


class Flaky(Dataset):
    """Sample i is i; the samples in ``bad`` raise ValueError."""

    def __init__(self, n: int, bad=()):
        self.n, self.bad = n, set(bad)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.bad:
            raise ValueError(f"bad sample {i}")
        return i


class FlakyStream:
    """An iterator over ``values`` whose values with ``v % 5 == 3`` raise; it goes on after."""

    def __init__(self, values):
        self.values = iter(values)

    def __iter__(self):
        return self

    def __next__(self):
        v = next(self.values)
        if v % 5 == 3:
            raise ValueError(f"bad value {v}")
        return v


class FlakyIterable(IterableDataset):
    """0..n-1 sharded over the workers; ``generator=True`` makes the stream die at its first
    error (a generator is finished once it raised)."""

    def __init__(self, n: int, generator: bool = False):
        self.n, self.generator = n, generator

    def _values(self):
        info = get_worker_info()
        return range(self.n) if info is None else range(info.id, self.n, info.num_workers)

    def __iter__(self):
        if not self.generator:
            return FlakyStream(self._values())
        return self._gen()

    def _gen(self):
        for v in self._values():
            if v % 5 == 3:
                raise ValueError(f"bad value {v}")
            yield v


def _drain(it, limit: int = 200) -> list:
    """Every outcome of ``next(it)`` until StopIteration: batches as lists, errors as
    ``("E", message)``."""
    out = []
    for _ in range(limit):
        try:
            b = next(it)
        except StopIteration:
            return out
        except ValueError as e:
            out.append(("E", str(e)))
        else:
            out.append(b.tolist() if hasattr(b, "tolist") else b)
    raise AssertionError(f"no StopIteration after {limit} steps: {out[:20]}")


def _shape(outcomes) -> list:
    return ["E" if isinstance(o, tuple) else o for o in outcomes]


def _torch_outcomes(bad, **kw) -> list:
    tud = pytest.importorskip("torch.utils.data")

    class TorchFlaky(tud.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            if i in bad:
                raise ValueError(f"bad sample {i}")
            return i

    return _shape(_drain(iter(tud.DataLoader(TorchFlaky(), **kw))))


def _dataloader_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("actorflow-dataloader")]


def _non_daemon() -> set:
    return {t for t in threading.enumerate() if not t.daemon}


@pytest.fixture
def release():
    """An Event that stuck dataset code waits on; set at teardown, after which every worker
    thread must end (a stuck thread is abandoned, not leaked for good)."""
    before = set(_dataloader_threads())
    ev = threading.Event()
    yield ev
    ev.set()
    deadline = time.monotonic() + 10
    while set(_dataloader_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(_dataloader_threads()) - before, \
        "worker threads still alive after their code returned"


# ---- errors: the failing batch raises, the epoch goes on -------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size,bad", [(2, {0, 5, 6, 15}), (3, {4, 5}), (None, {1, 2, 9})])
def test_map_errors_continue_like_single_thread_and_torch(batch_size, bad):
    before = set(_dataloader_threads())
    ref = _drain(iter(DataLoader(Flaky(N, bad), batch_size=batch_size)))
    assert _shape(ref) == _torch_outcomes(bad, batch_size=batch_size)
    n_err = sum(isinstance(o, tuple) for o in ref)
    assert n_err == (len({i // batch_size for i in bad}) if batch_size else len(bad))
    for workers in (1, 2, 3):
        for prefetch in (1, 2, 4):
            loader = DataLoader(Flaky(N, bad), batch_size=batch_size, num_workers=workers,
                                prefetch_factor=prefetch)
            got = _drain(iter(loader))
            assert _shape(got) == _shape(ref), (workers, prefetch)
            for k, o in enumerate(got):
                if isinstance(o, tuple):  # the error names the batch and its worker
                    assert (f"worker thread {k % workers} while loading batch {k}:"
                            in o[1]), o[1]
    assert set(_dataloader_threads()) <= before


@pytest.mark.timeout(60)
def test_map_errors_with_shuffle_and_every_batch_failing():
    bad = {1, 7, 8, 12}
    flow.manual_seed(3)
    ref = _shape(_drain(iter(DataLoader(Flaky(N, bad), batch_size=3, shuffle=True))))
    for workers in (1, 3):
        flow.manual_seed(3)
        loader = DataLoader(Flaky(N, bad), batch_size=3, shuffle=True, num_workers=workers)
        assert _shape(_drain(iter(loader))) == ref
    assert "E" in ref and len(ref) == 6
    # every batch fails: one error per batch, then the end of the epoch
    everything = DataLoader(Flaky(N, range(N)), batch_size=4, num_workers=2)
    assert _shape(_drain(iter(everything))) == ["E"] * 4
    # a for loop stops at the error; a second loop over the same iterator finishes the epoch
    it = iter(DataLoader(Flaky(N, {4}), batch_size=4, num_workers=2, prefetch_factor=1))
    seen = []
    with pytest.raises(ValueError, match="batch 1"):
        for b in it:
            seen.append(b.tolist())
    seen += [b.tolist() for b in it]
    assert seen == [[0, 1, 2, 3], [8, 9, 10, 11], [12, 13, 14, 15]]


@pytest.mark.timeout(60)
def test_errors_with_persistent_workers_leave_next_epoch_whole():
    loader = DataLoader(Flaky(N, {3}), batch_size=4, num_workers=2, persistent_workers=True)
    assert _shape(_drain(iter(loader))) == ["E", [4, 5, 6, 7], [8, 9, 10, 11],
                                            [12, 13, 14, 15]]
    loader.dataset.bad.clear()
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                            [12, 13, 14, 15]]


def _round_robin(streams: list) -> list:
    """Outcomes taken from the per-worker ``streams`` in turn, skipping ended ones."""
    out, pos = [], [0] * len(streams)
    live = list(range(len(streams)))
    turn = 0
    while live:
        turn %= len(live)
        w = live[turn]
        if pos[w] == len(streams[w]):
            live.pop(turn)
            continue
        out.append(streams[w][pos[w]])
        pos[w] += 1
        turn += 1
    return out


class _Shard(FlakyIterable):
    """The stream worker ``wid`` of ``workers`` sees, read in the main thread."""

    def __init__(self, n, generator, wid, workers):
        super().__init__(n, generator)
        self.wid, self.workers = wid, workers

    def _values(self):
        return range(self.wid, self.n, self.workers)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("generator", [False, True])
def test_iterable_errors_continue_in_worker_turns(generator):
    before = set(_dataloader_threads())
    ds = FlakyIterable(20, generator)
    ref = _shape(_drain(iter(DataLoader(ds, batch_size=3))))
    tud = pytest.importorskip("torch.utils.data")

    class TorchFlaky(tud.IterableDataset):
        def __iter__(self):
            return iter(FlakyIterable(20, generator))

    assert _shape(_drain(iter(tud.DataLoader(TorchFlaky(), batch_size=3)))) == ref
    for workers in (1, 2, 3):
        streams = [_shape(_drain(iter(DataLoader(_Shard(20, generator, w, workers),
                                                 batch_size=3))))
                   for w in range(workers)]
        expected = _round_robin(streams)
        if workers == 1:
            assert expected == ref
        if workers == 2:  # what torch.utils.data gives with 2 worker processes (torch 2.13)
            assert expected == ([[0, 2, 4], "E", "E"] if generator else
                                [[0, 2, 4], "E", "E", [5, 7, 9], [10, 12, 14], "E", "E",
                                 [15, 17, 19]])
        for prefetch in (1, 3):
            loader = DataLoader(ds, batch_size=3, num_workers=workers, prefetch_factor=prefetch)
            got = _drain(iter(loader))
            assert _shape(got) == expected, (workers, prefetch)
            assert all(" of worker " in o[1] for o in got if isinstance(o, tuple))
    assert set(_dataloader_threads()) <= before


@pytest.mark.timeout(60)
def test_worker_init_error_is_reported_per_batch_of_that_worker():
    def init(worker_id):
        if worker_id == 1:
            raise ValueError("no init")

    got = _drain(iter(DataLoader(Flaky(8), batch_size=2, num_workers=2, worker_init_fn=init)))
    assert _shape(got) == [[0, 1], "E", [4, 5], "E"]
    assert "worker_init_fn" in got[1][1] and "no init" in got[1][1]
    # iterable: that worker reports it once and has nothing more; the others deliver
    got = _drain(iter(DataLoader(FlakyIterable(9), batch_size=None, num_workers=2,
                                 worker_init_fn=init)))
    assert _shape(got) == [0, "E", 2, 4, 6, "E"]  # 8 % 5 == 3 raises in the stream itself


class ListSampler(Sampler):
    """Yields ``order``; the positions in ``bad`` raise (and the iterator goes on)."""

    def __init__(self, order, bad=(), generator=False):
        self.order, self.bad, self.generator = list(order), set(bad), generator

    def __len__(self):
        return len(self.order)

    def __iter__(self):
        return self._gen() if self.generator else _SamplerIter(self)

    def _gen(self):
        for k, i in enumerate(self.order):
            if k in self.bad:
                raise ValueError(f"sampler broke at {k}")
            yield i


class _SamplerIter:
    def __init__(self, s):
        self.s, self.k = s, 0

    def __next__(self):
        k = self.k
        if k == len(self.s.order):
            raise StopIteration
        self.k += 1
        if k in self.s.bad:
            raise ValueError(f"sampler broke at {k}")
        return self.s.order[k]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("generator", [False, True])
def test_sampler_errors_raise_in_their_turn(generator):
    before = set(_dataloader_threads())
    def make(workers):
        sampler = ListSampler([5, 3, 9, 1, 0, 7], bad={2, 4}, generator=generator)
        kw = {"num_workers": workers} if workers else {}
        return DataLoader(Flaky(10), batch_size=None, sampler=sampler, **kw)

    ref = _drain(iter(make(0)))
    assert ref == ([5, 3, ("E", "sampler broke at 2")] if generator else
                   [5, 3, ("E", "sampler broke at 2"), 1, ("E", "sampler broke at 4"), 7])
    for workers in (1, 2, 3):
        assert _drain(iter(make(workers))) == ref
    assert set(_dataloader_threads()) <= before


# ---- timeouts and shutdown never wait unbounded ----------------------------------------------

class Stuck(Dataset):
    """Sample i is i; the first load of a sample in ``stuck`` waits on ``release`` (at most
    ``hold`` seconds) and then returns ``-1 - i`` (a stale value nobody may receive)."""

    def __init__(self, n: int, stuck, release: threading.Event, hold: float = 60.0):
        self.n, self.stuck, self.release, self.hold = n, set(stuck), release, hold
        self.lock = threading.Lock()
        self.entered = threading.Event()  # set when a stuck load has begun

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with self.lock:
            first = i in self.stuck
            self.stuck.discard(i)
        if first:
            self.entered.set()
            self.release.wait(self.hold)
            return -1 - i
        return i


def _timed_next(it):
    """``(next(it) or the error's type and message, seconds taken)``. The error itself is not
    kept: its traceback would keep this frame's caller, and so the iterator, alive."""
    t0 = time.monotonic()
    try:
        return next(it), time.monotonic() - t0
    except Exception as e:
        return (type(e), str(e)), time.monotonic() - t0


def test_timeout_validation():
    with pytest.raises(ValueError, match="timeout"):
        DataLoader(Flaky(4), num_workers=1, timeout=-1)
    for bad in (float("nan"), float("inf"), "1", None):
        with pytest.raises(ValueError, match="timeout"):
            DataLoader(Flaky(4), num_workers=1, timeout=bad)
    with pytest.raises(ValueError, match="timeout needs num_workers > 0"):
        DataLoader(Flaky(4), timeout=1.0)
    assert list(DataLoader(Flaky(4), timeout=0)) == [0, 1, 2, 3]
    assert [int(b) for b in DataLoader(Flaky(4), num_workers=2, timeout=5)] == [0, 1, 2, 3]
    loader = DataLoader(Flaky(4), num_workers=1, timeout=np.float32(2.5))
    assert [int(b) for b in loader] == [0, 1, 2, 3]


@pytest.mark.timeout(30)
def test_timeout_raises_in_time_then_the_same_batch_can_be_awaited(release):
    non_daemon = _non_daemon()
    it = iter(DataLoader(Stuck(8, {3}, release), batch_size=None, num_workers=2, timeout=0.5))
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    err, took = _timed_next(it)
    assert err[0] is RuntimeError, err
    assert "timed out after 0.5 seconds waiting for batch 3 from worker thread 1" in err[1]
    assert "it has been in user code (dataset, collate_fn) for" in err[1]
    assert 0.45 <= took < 3.0
    err, took = _timed_next(it)  # nothing was consumed: the same batch again
    assert err[0] is RuntimeError and "batch 3" in err[1] and took < 3.0
    assert all(t.daemon for t in _dataloader_threads()) and _non_daemon() == non_daemon
    release.set()  # the late result still belongs to this epoch, and comes in order
    assert [int(b) for b in it] == [-4, 4, 5, 6, 7]


@pytest.mark.timeout(30)
def test_timeout_with_a_20s_sample_raises_and_shuts_down_in_time(release):
    """The issue's case: a 20 s ``__getitem__`` with ``timeout=1.0``."""
    non_daemon = _non_daemon()
    ds = Stuck(8, {0}, release, hold=20.0)
    loader = DataLoader(ds, batch_size=2, num_workers=2, timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"timed out after 1.0 seconds waiting for batch 0"):
        list(loader)  # the iterator dies with the exception: its shutdown must not wait 20 s
    assert time.monotonic() - t0 < 4.0
    assert _non_daemon() == non_daemon
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["break", "del", "exception", "persistent"])
def test_shutdown_with_a_never_returning_sample_is_bounded(release, how):
    non_daemon, before = _non_daemon(), set(_dataloader_threads())
    # sample 3 is prefetched (2 workers x prefetch 2) and never returns; no timeout is set
    ds = Stuck(12, {3}, release)
    loader = DataLoader(ds, batch_size=None, num_workers=2,
                        persistent_workers=how == "persistent")
    t0 = time.monotonic()
    if how == "break":
        for _ in loader:
            assert ds.entered.wait(10)
            t0 = time.monotonic()
            break
    elif how in ("del", "persistent"):
        it = iter(loader)
        next(it)
        assert ds.entered.wait(10)
        t0 = time.monotonic()
        del it
        if how == "persistent":
            del loader
    else:
        with pytest.raises(KeyError):
            for _ in loader:
                assert ds.entered.wait(10)
                t0 = time.monotonic()
                raise KeyError("user code failed")
    assert time.monotonic() - t0 < 3.0
    stuck = set(_dataloader_threads()) - before
    assert len(stuck) == 1 and stuck.pop().daemon
    assert _non_daemon() == non_daemon
    if how != "persistent":  # a new epoch isn't disturbed by the abandoned thread
        assert [int(b) for b in loader] == list(range(12))


class Hanging(IterableDataset):
    """Worker 0 yields 0 and ends ``pause`` s later; worker 1 yields 1, waits on ``release``,
    then yields 3."""

    def __init__(self, release, pause: float):
        self.release, self.pause = release, pause

    def __iter__(self):
        if get_worker_info().id == 0:
            yield 0
            time.sleep(self.pause)
            return
        yield 1
        self.release.wait(60)
        yield 3


@pytest.mark.timeout(30)
def test_iterable_timeout_bounds_the_whole_wait(release):
    it = iter(DataLoader(Hanging(release, pause=1.5), batch_size=None, num_workers=2,
                         timeout=2.0, prefetch_factor=4))
    assert [int(next(it)) for _ in range(2)] == [0, 1]
    # worker 0 takes ~1.5 s to end, then worker 1 hangs: one 2 s bound covers both waits
    err, took = _timed_next(it)
    assert err[0] is RuntimeError, err
    assert "timed out after 2.0 seconds waiting for batch 1 of worker 1" in err[1]
    assert 1.9 <= took < 3.0
    release.set()
    assert [int(b) for b in it] == [3]

@pytest.mark.timeout(60)
@pytest.mark.parametrize("iterable", [False, True])
def test_persistent_workers_replace_a_stuck_thread_and_drop_its_late_result(release, iterable):
    before = set(_dataloader_threads())
    inits = []
    if iterable:
        class Once(IterableDataset):
            def __init__(self):
                self.first = True

            def __iter__(self):
                info = get_worker_info()
                for v in range(info.id, 8, info.num_workers):
                    if v == 3 and self.first:
                        self.first = False
                        release.wait(60)
                        yield -4
                    else:
                        yield v
        ds = Once()
    else:
        ds = Stuck(8, {3}, release)
    loader = DataLoader(ds, batch_size=None, num_workers=2, timeout=0.5,
                        persistent_workers=True, worker_init_fn=inits.append)
    it = iter(loader)
    first = [int(next(it)) for _ in range(3)]
    assert first == [0, 1, 2]
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        next(it)
    time.sleep(0.1)  # the thread has been in user code for longer than the timeout
    it2 = iter(loader)  # a fresh thread serves worker 1
    got = [int(next(it2)) for _ in range(3)]
    assert sorted(inits) == [0, 1, 1]
    release.set()  # the stuck call returns -4 now, while the new epoch has sample 3 ready
    time.sleep(0.3)
    got += [int(b) for b in it2]
    assert got == list(range(8))  # the late result reached no epoch
    assert [int(b) for b in loader] == list(range(8))
    with pytest.raises(RuntimeError, match="superseded"):
        next(it)
    assert sorted(inits) == [0, 1, 1]
    assert len(set(_dataloader_threads()) - before) == 2


_EXIT_SCRIPT = """
import sys, threading, time
from actorflow.utils.data import DataLoader, Dataset

class Forever(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if i == 1:
            threading.Event().wait()
        return i

mode = sys.argv[1]
if mode == "alive":  # an iterator with a stuck worker is alive when the script ends
    it = iter(DataLoader(Forever(), batch_size=None, num_workers=2))
    print(int(next(it)), flush=True)
elif mode == "caught":
    it = iter(DataLoader(Forever(), batch_size=None, num_workers=2, timeout=0.3))
    next(it)
    try:
        next(it)
    except RuntimeError as e:
        print("caught:", e, flush=True)
else:  # the timeout error ends the script
    for b in DataLoader(Forever(), batch_size=None, num_workers=2, timeout=0.3):
        pass
"""


@pytest.mark.timeout(120)
def test_stuck_worker_threads_do_not_block_interpreter_exit():
    env = dict(os.environ, PYTHONPATH=ROOT)
    for mode, rc, text in [("alive", 0, "0"), ("caught", 0, "caught: DataLoader timed out"),
                           ("uncaught", 1, "timed out after 0.3 seconds waiting for batch 1")]:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_EXIT_SCRIPT), mode],
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == rc, (mode, proc.stderr[-2000:])
        assert text in proc.stdout + proc.stderr, (mode, proc.stdout, proc.stderr[-2000:])
        assert time.monotonic() - t0 < 30, mode
