"""actorflow.utils.data: datasets, samplers, collation and the (threaded) DataLoader."""
from __future__ import annotations

import collections
import random
import threading
import time

import numpy as np
import pytest

import actorflow as flow
from actorflow.utils.data import (
    BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,
    RandomSampler, SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
    default_collate, default_convert, get_worker_info, random_split,
)


class Squares(Dataset):
    """Sample i is (float32 array [i, i*i], int label i); records which indices were read."""

    def __init__(self, n: int, delay=None):
        self.n = n
        self.delay = delay
        self.seen: list = []
        self.lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        with self.lock:
            self.seen.append(i)
        if self.delay is not None:
            time.sleep(self.delay(i))
        return np.array([i, i * i], dtype=np.float32), i


class Range(IterableDataset):
    """0..n-1; with workers, each worker takes every num_workers-th value when ``shard``."""

    def __init__(self, n: int, shard: bool = True):
        self.n = n
        self.shard = shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def _flat(batches):
    return [int(v) for b in batches for v in b[1].numpy()]


# ---- datasets -------------------------------------------------------------------------------

def test_tensor_dataset():
    x = flow.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    y = flow.tensor(np.arange(6))
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[4]
    np.testing.assert_array_equal(a.numpy(), [8, 9])
    assert b.item() == 4
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(x, flow.tensor(np.arange(5)))
    with pytest.raises(TypeError):
        TensorDataset(x, np.arange(6))


def test_subset_concat_and_add():
    a, b = Squares(3), Squares(4)
    sub = Subset(b, [3, 1])
    assert len(sub) == 2 and sub[0][1] == 3 and sub[1][1] == 1
    cat = a + b
    assert isinstance(cat, ConcatDataset) and len(cat) == 7
    assert [cat[i][1] for i in range(7)] == [0, 1, 2, 0, 1, 2, 3]
    assert cat[-1][1] == 3 and cat[-7][1] == 0
    with pytest.raises(IndexError):
        cat[7]
    with pytest.raises(IndexError):
        cat[-8]
    with pytest.raises(ValueError):
        ConcatDataset([])
    chained = Range(2) + Range(3)
    assert isinstance(chained, ChainDataset) and list(chained) == [0, 1, 0, 1, 2]


def test_random_split_lengths_and_fractions():
    ds = Squares(10)
    flow.manual_seed(3)
    parts = random_split(ds, [3, 7])
    idx = [list(p.indices) for p in parts]
    assert [len(i) for i in idx] == [3, 7]
    assert sorted(idx[0] + idx[1]) == list(range(10))
    flow.manual_seed(3)
    assert [list(p.indices) for p in random_split(ds, [3, 7])] == idx
    # fractions: floor, then the remainder goes round-robin (10 * [.25, .25, .5] -> 3, 2, 5)
    parts = random_split(ds, [0.25, 0.25, 0.5], generator=flow.Generator(1))
    assert [len(p) for p in parts] == [3, 2, 5]
    again = random_split(ds, [0.25, 0.25, 0.5], generator=flow.Generator(1))
    assert [list(p.indices) for p in parts] == [list(p.indices) for p in again]
    with pytest.raises(ValueError, match="does not equal"):
        random_split(ds, [3, 3])
    with pytest.raises(ValueError):
        random_split(ds, [0.5, 0.7])


# ---- samplers -------------------------------------------------------------------------------

def test_sequential_random_and_batch_samplers():
    ds = Squares(7)
    assert list(SequentialSampler(ds)) == list(range(7))
    flow.manual_seed(0)
    s = RandomSampler(ds)
    first, second = list(s), list(s)
    assert sorted(first) == list(range(7)) and sorted(second) == list(range(7))
    assert first != second  # a new permutation each epoch (7! orders: a clash is ~1/5040)
    flow.manual_seed(0)
    assert list(s) == first
    g1, g2 = flow.Generator(5), flow.Generator(5)
    assert list(RandomSampler(ds, generator=g1)) == list(RandomSampler(ds, generator=g2))
    longer = list(RandomSampler(ds, num_samples=17))
    assert len(longer) == 17 and sorted(set(longer)) == list(range(7))
    repl = list(RandomSampler(ds, replacement=True, num_samples=50))
    assert len(repl) == 50 and all(0 <= i < 7 for i in repl) and len(set(repl)) < 50
    assert sorted(SubsetRandomSampler([4, 2, 9])) == [2, 4, 9]
    bs = BatchSampler(SequentialSampler(ds), 3, drop_last=False)
    assert list(bs) == [[0, 1, 2], [3, 4, 5], [6]] and len(bs) == 3
    bs = BatchSampler(SequentialSampler(ds), 3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    with pytest.raises(ValueError):
        BatchSampler(SequentialSampler(ds), 0, drop_last=False)


# ---- collation ------------------------------------------------------------------------------

def test_default_collate_leaves():
    t = default_collate([flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])])
    assert t.shape == (2, 2) and t.dtype == flow.float32
    np.testing.assert_array_equal(t.numpy(), [[1, 2], [3, 4]])
    ints = default_collate([1, 2, 3])
    assert ints.dtype == flow.int64 and ints.tolist() == [1, 2, 3]
    floats = default_collate([0.5, 1.5])
    assert floats.dtype == flow.float64 and floats.tolist() == [0.5, 1.5]
    bools = default_collate([True, False])
    assert bools.dtype == flow.bool and bools.tolist() == [True, False]
    arr = default_collate([np.ones((2, 3), np.int32), np.zeros((2, 3), np.int32)])
    assert arr.shape == (2, 2, 3) and arr.dtype == flow.int32
    npnum = default_collate([np.float32(1), np.float32(2)])
    assert npnum.dtype == flow.float32
    assert default_collate(["a", "b"]) == ["a", "b"]


def test_default_collate_containers():
    Point = collections.namedtuple("Point", "x y")
    batch = [{"img": np.full(2, i, np.float32), "meta": {"id": i, "name": f"s{i}"},
              "pt": Point(i, float(i))} for i in range(3)]
    out = default_collate(batch)
    assert out["img"].shape == (3, 2)
    assert out["meta"]["id"].tolist() == [0, 1, 2]
    assert out["meta"]["name"] == ["s0", "s1", "s2"]
    assert isinstance(out["pt"], Point) and out["pt"].y.dtype == flow.float64
    od = default_collate([collections.OrderedDict(b=1, a=2)] * 2)
    assert isinstance(od, collections.OrderedDict) and list(od) == ["b", "a"]
    cols = default_collate([(1, "x"), (2, "y")])
    assert isinstance(cols, list) and cols[0].tolist() == [1, 2] and cols[1] == ["x", "y"]
    lists = default_collate([[1, 2], [3, 4]])
    assert [c.tolist() for c in lists] == [[1, 3], [2, 4]]


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match=r"equal size.*\[3\] at entry 0 and \[4\] at entry 2"):
        default_collate([flow.zeros(3), flow.zeros(3), flow.zeros(4)])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [1, 2, 3]])
    with pytest.raises(RuntimeError, match="same keys"):
        default_collate([{"a": 1}, {"b": 1}])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])
    with pytest.raises(TypeError):
        default_collate([flow.zeros(2), np.zeros(2)])


def test_default_convert():
    out = default_convert({"a": np.arange(3), "b": [np.ones(2, np.float32), "s"], "c": 1})
    assert isinstance(out["a"], flow.Tensor) and out["a"].dtype == flow.int64
    assert isinstance(out["b"][0], flow.Tensor) and out["b"][1] == "s" and out["c"] == 1


# ---- DataLoader (single thread) -------------------------------------------------------------

def test_loader_batches_len_and_drop_last():
    ds = Squares(10)
    loader = DataLoader(ds, batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    x, y = batches[0]
    assert x.shape == (4, 2) and x.dtype == flow.float32 and y.dtype == flow.int64
    assert _flat(batches) == list(range(10))
    assert batches[2][0].shape == (2, 2)
    loader = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(loader) == 2 and _flat(loader) == list(range(8))
    single = list(DataLoader(ds, batch_size=None))
    assert len(single) == 10 and isinstance(single[3][0], flow.Tensor) and single[3][1] == 3
    custom = list(DataLoader(ds, batch_size=5, collate_fn=lambda b: [s[1] for s in b]))
    assert custom == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    bs = BatchSampler(SequentialSampler(ds), 6, drop_last=False)
    assert [len(b[1]) for b in DataLoader(ds, batch_sampler=bs)] == [6, 4]


def test_loader_shuffle_reproducible():
    ds = Squares(20)
    loader = DataLoader(ds, batch_size=5, shuffle=True)
    flow.manual_seed(42)
    a = _flat(loader)
    b = _flat(loader)
    flow.manual_seed(42)
    c = _flat(loader)
    assert sorted(a) == list(range(20)) and a == c and a != b
    g = DataLoader(ds, batch_size=5, shuffle=True, generator=flow.Generator(7))
    h = DataLoader(ds, batch_size=5, shuffle=True, generator=flow.Generator(7))
    assert _flat(g) == _flat(h)


def test_loader_argument_errors():
    ds = Squares(4)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler"):
        DataLoader(ds, batch_size=2, batch_sampler=BatchSampler(SequentialSampler(ds), 2, False))
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Range(4), shuffle=True)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(ds, persistent_workers=True)


def test_loader_iterable_dataset():
    loader = DataLoader(Range(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    assert [b.tolist() for b in DataLoader(Range(7), batch_size=3, drop_last=True)] == \
        [[0, 1, 2], [3, 4, 5]]


# ---- DataLoader with worker threads ---------------------------------------------------------

def _threads() -> frozenset:
    """The threads alive now (a baseline: threads other tests leave ending meanwhile are fine)."""
    return frozenset(threading.enumerate())


def _new_threads(baseline: frozenset) -> set:
    return set(threading.enumerate()) - baseline


def _settled(baseline: frozenset) -> bool:
    return not _new_threads(baseline)


def test_workers_match_single_thread_and_keep_order():
    rng = random.Random(0)
    delays = [rng.random() * 0.004 for _ in range(40)]
    ds = Squares(40, delay=lambda i: delays[i])
    baseline = _threads()
    flow.manual_seed(9)
    ref = _flat(DataLoader(ds, batch_size=3, shuffle=True))
    flow.manual_seed(9)
    loader = DataLoader(ds, batch_size=3, shuffle=True, num_workers=3)
    got = _flat(loader)
    assert got == ref
    assert len(loader) == 14
    assert _settled(baseline), "worker threads left running after the epoch"


def test_workers_run_in_threads_with_worker_info():
    names, infos, init_ids = set(), [], []

    class Probe(Dataset):
        def __len__(self):
            return 12

        def __getitem__(self, i):
            names.add(threading.current_thread().name)
            infos.append(get_worker_info())
            time.sleep(0.002)
            return i

    assert get_worker_info() is None
    loader = DataLoader(Probe(), batch_size=2, num_workers=2, worker_init_fn=init_ids.append)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    assert threading.current_thread().name not in names and len(names) == 2
    assert sorted(init_ids) == [0, 1]
    assert list(DataLoader(Probe(), batch_size=None, num_workers=2)) == list(range(12))
    assert {i.id for i in infos} == {0, 1} and all(i.num_workers == 2 for i in infos)
    assert len({i.seed for i in infos}) == 4  # two workers in each of two loaders


def test_prefetch_is_bounded_and_delete_stops_threads():
    ds = Squares(100)
    baseline = _threads()
    it = iter(DataLoader(ds, batch_size=1, num_workers=2, prefetch_factor=2))
    x, y = next(it)
    assert y.tolist() == [0]
    time.sleep(0.1)
    assert len(_new_threads(baseline)) == 2
    # one batch taken: at most 2 workers * prefetch 2 = 4 more are loaded ahead
    assert len(ds.seen) <= 5
    del it
    assert _settled(baseline), "deleting the iterator must stop its worker threads"
    for _ in DataLoader(ds, batch_size=2, num_workers=2):
        break
    assert _settled(baseline), "leaving a for loop early must stop the worker threads"


def test_worker_exception_names_batch_and_iteration_goes_on():
    class Faulty(Dataset):
        def __len__(self):
            return 20

        def __getitem__(self, i):
            if i == 13:
                raise KeyError(f"bad sample {i}")
            return i

    baseline = _threads()
    it = iter(DataLoader(Faulty(), batch_size=4, num_workers=2))
    assert next(it).tolist() == [0, 1, 2, 3]
    assert next(it).tolist() == [4, 5, 6, 7]
    assert next(it).tolist() == [8, 9, 10, 11]
    with pytest.raises(KeyError, match=r"worker thread 1 while loading batch 3.*bad sample 13"):
        next(it)
    assert next(it).tolist() == [16, 17, 18, 19]  # the rest of the epoch, as without workers
    with pytest.raises(StopIteration):
        next(it)
    assert _settled(baseline)


def test_worker_init_error_and_timeout():
    def boom(worker_id):
        raise ValueError("no init")

    with pytest.raises(ValueError, match="worker_init_fn.*no init"):
        list(DataLoader(Squares(4), num_workers=1, worker_init_fn=boom))
    slow = Squares(4, delay=lambda i: 0.5)
    baseline = _threads()
    with pytest.raises(RuntimeError, match="timed out after 0.05 seconds waiting for batch 0"):
        list(DataLoader(slow, num_workers=1, timeout=0.05))
    # the abandoned thread ends once its sample is loaded (it can't be interrupted)
    deadline = time.monotonic() + 10
    while not _settled(baseline) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _settled(baseline)


def test_workers_iterable_dataset():
    baseline = _threads()
    sharded = DataLoader(Range(10), batch_size=2, num_workers=2)
    batches = [b.tolist() for b in sharded]
    # worker 0 yields evens, worker 1 odds; batches are taken from the workers in turn
    assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    unsharded = DataLoader(Range(5, shard=False), batch_size=5, num_workers=2)
    assert [b.tolist() for b in unsharded] == [[0, 1, 2, 3, 4]] * 2
    assert _settled(baseline)


def test_persistent_workers_reuse_threads():
    names = []

    class Named(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            names.append(threading.current_thread().ident)
            return i

    baseline = _threads()
    loader = DataLoader(Named(), batch_size=2, num_workers=2, persistent_workers=True)
    for _ in range(3):
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    assert len(set(names)) == 2
    assert len(_new_threads(baseline)) == 2
    it = iter(loader)
    next(it)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(RuntimeError, match="superseded"):
        next(it)
    del it, loader
    assert _settled(baseline)
