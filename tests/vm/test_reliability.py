"""VM reliability: errors raised once where their tensors are read, back-pressure by bytes and
graph calls."""
from __future__ import annotations

import gc
import time
import weakref

import numpy as np
import pytest

import actorflow as flow
from actorflow import vm
from actorflow.tensor import Tensor
from actorflow.vm import failures, scheduler

pytestmark = pytest.mark.timeout(180)
async_only = pytest.mark.skipif(vm.is_blocking(), reason="timing of the asynchronous mode")


def _fail(exc):
    def fn():
        raise exc
    return fn


def _blob(n=4):
    return Tensor._wrap(np.zeros(n, np.float32), flow.float32)


# ---- errors -----------------------------------------------------------------------------------

@async_only  # (blocking mode raises a failed op at its call: nothing is deferred)
def test_a_composite_failure_is_raised_where_read_not_at_unrelated_reads():
    a, b = _blob(), _blob()
    vm.launch(_fail(ValueError("first")), creates=[a], name="part1")
    vm.launch(_fail(KeyError("second")), creates=[b], name="part2")
    with pytest.raises(vm.KernelError, match="part1"):
        (a + b).numpy()
    for _ in range(3):  # unrelated reads after the caught failure
        np.testing.assert_array_equal((flow.ones(3) * 2).numpy(), [2, 2, 2])
        assert flow.tensor([1.5]).item() == 1.5
    with pytest.raises(vm.KernelError, match="part2"):  # never read: synchronize, once
        flow.synchronize()
    flow.synchronize()
    with pytest.raises(vm.KernelError, match="part1"):  # the poisoned tensors stay poisoned
        a.numpy()


@async_only  # (blocking mode raises a failed op at its call: nothing is deferred)
def test_synchronize_raises_once_for_many_unread_failures_and_keeps_none():
    class Payload:
        pass
    payload = Payload()
    ref = weakref.ref(payload)
    for i in range(200):
        vm.launch(_fail(ValueError(f"bad {i}", payload if i == 0 else None)),
                  creates=[_blob(100_000)], name=f"bad{i}")
    del payload
    assert len(failures.unreported()) <= failures.KEEP
    with pytest.raises(vm.KernelError, match=r"bad0(.|\n)*199 other failed instruction"):
        flow.synchronize()
    flow.synchronize()  # all reported
    assert failures.unreported_count() == 0 and failures.unreported() == []
    deadline = time.monotonic() + 5.0  # (a worker thread may still be unwinding its frame)
    while gc.collect() is not None and ref() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ref() is None  # nothing of the failed ops is kept


@async_only  # (blocking mode raises a failed op at its call: nothing is deferred)
def test_a_failed_in_place_write_is_raised_once_by_the_next_read():
    x = flow.tensor([1, 2], dtype=flow.int64)
    x.floor_divide_(0)
    np.testing.assert_array_equal(flow.ones(2).numpy(), [1, 1])  # unrelated: no error
    with pytest.raises(RuntimeError, match="floor_divide"):
        x.numpy()
    np.testing.assert_array_equal(x.numpy(), [1, 2])  # once; the previous values
    flow.synchronize()


@async_only  # (blocking mode raises a failed op at its call: nothing is deferred)
def test_a_failed_in_place_write_is_raised_by_the_next_op_on_it():
    x = flow.tensor([4, 6], dtype=flow.int64)
    x.floor_divide_(0)
    with pytest.raises(RuntimeError, match="floor_divide"):
        x + 1
    np.testing.assert_array_equal((x + 1).numpy(), [5, 7])
    flow.synchronize()


@async_only  # (blocking mode raises a failed op at its call: nothing is deferred)
def test_an_error_read_once_is_not_raised_by_synchronize():
    y = flow.tensor([1, 2]) // 0
    with pytest.raises(RuntimeError, match="floor_divide"):
        y.numpy()
    flow.synchronize()
    with pytest.raises(RuntimeError, match="floor_divide"):
        y.tolist()  # its values never existed


# ---- back-pressure ----------------------------------------------------------------------------

@async_only
def test_queued_bytes_are_bounded(monkeypatch):
    monkeypatch.setattr(scheduler, "MAX_QUEUED_BYTES", 4 << 20)
    w = vm.current_worker()
    x = flow.ones(256, 1024)  # 1 MiB outputs
    vm.launch(lambda: time.sleep(0.2), name="busy")
    peak = 0
    for _ in range(40):
        y = x * 2
        peak = max(peak, w.pending_bytes)
    assert peak <= (4 << 20) + x._h.raw.nbytes
    np.testing.assert_array_equal(y.numpy()[0, :3], [2, 2, 2])


class _Twice(flow.nn.Graph):
    def build(self, x):
        return x * 2


@async_only
def test_graph_calls_count_until_they_finish(monkeypatch):
    monkeypatch.setattr(scheduler, "MAX_QUEUED", 6)
    g = _Twice()
    x = flow.ones(4)
    g(x).numpy()
    w = vm.current_worker()
    rt = g._compiled.executor.runtime if hasattr(g, "_compiled") else None
    peak = 0
    for _ in range(60):
        out = g(x)
        peak = max(peak, len([i for i in w.pending if not i.done]))
        if rt is not None:
            peak = max(peak, len(rt.pending))
    assert peak <= 7
    np.testing.assert_array_equal(out.numpy(), [2, 2, 2, 2])
