"""flow.asyncs: the bounded pool of worker threads and the thread-local ``thread`` context."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import actorflow as flow
from actorflow import vm

LIMIT = vm.LIMIT_VAR
async_only = pytest.mark.skipif(vm.is_blocking(), reason="timing of the asynchronous mode")


def _vm_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("actorflow-vm-worker-")]


def _ran_on(name_box):
    """Launch (on the current worker) a callable recording the thread that runs it."""
    vm.launch(lambda: name_box.append(threading.current_thread().name), name="whoami")


# ---- the pool ---------------------------------------------------------------------------------

def test_pool_limit_names_the_variable(monkeypatch):
    gc.collect()
    monkeypatch.setenv(LIMIT, "3")
    held = [flow.asyncs.Thread() for _ in range(3 - len(vm.pool().in_use()))]
    with pytest.raises(RuntimeError, match=f"{LIMIT}=3"):
        flow.asyncs.Thread()
    del held


def test_default_limit_is_sixteen(monkeypatch):
    monkeypatch.delenv(LIMIT, raising=False)
    gc.collect()
    held = [flow.asyncs.Thread() for _ in range(16 - len(vm.pool().in_use()))]
    assert vm.pool().in_use() == set(range(1, 17))
    with pytest.raises(RuntimeError, match=LIMIT):
        flow.asyncs.Thread()
    assert 0 not in {t.worker_id for t in held}  # the default worker is never handed out
    del held


def test_bad_limit_value(monkeypatch):
    monkeypatch.setenv(LIMIT, "many")
    with pytest.raises(ValueError, match=LIMIT):
        flow.asyncs.Thread()


def test_released_ids_are_reused(monkeypatch):
    monkeypatch.setenv(LIMIT, "16")
    gc.collect()
    t = flow.asyncs.Thread()
    wid = t.worker_id
    del t
    gc.collect()
    assert flow.asyncs.Thread().worker_id == wid


def test_no_thread_leak_after_many_threads():
    gc.collect()
    before = len(_vm_threads())
    for i in range(300):
        with flow.asyncs.thread(flow.asyncs.Thread()):
            y = flow.full((64,), float(i)) + 1
    assert y.numpy()[0] == 300.0
    gc.collect()
    assert len(_vm_threads()) <= max(before, 1) + vm.DEFAULT_LIMIT
    assert len(_vm_threads()) <= 1 + vm.DEFAULT_LIMIT
    assert len(vm.pool().in_use()) == 0


def test_contexts_in_a_loop_reuse_stream_objects():
    t = flow.asyncs.Thread()
    streams = set()
    for _ in range(100):
        with flow.asyncs.thread(t):
            streams.add(id(vm.current_worker().streams["compute"]))
    assert len(streams) == 1


# ---- the context ------------------------------------------------------------------------------

def test_context_selects_the_worker_and_restores_it():
    t1, t2 = flow.asyncs.Thread(), flow.asyncs.Thread()
    assert vm.current_worker().id == 0
    with flow.asyncs.thread(t1):
        assert vm.current_worker().id == t1.worker_id
        with flow.asyncs.thread(t2):
            assert vm.current_worker().id == t2.worker_id
        assert vm.current_worker().id == t1.worker_id
    assert vm.current_worker().id == 0


def test_context_is_thread_local():
    t = flow.asyncs.Thread()
    seen = {}

    def other():
        seen["other"] = vm.current_worker().id
        seen["value"] = (flow.ones(3) * 2).sum().item()

    with flow.asyncs.thread(t):
        th = threading.Thread(target=other)
        th.start()
        th.join()
        seen["here"] = vm.current_worker().id
    assert seen == {"other": 0, "value": 6.0, "here": t.worker_id}


def test_decorator_form():
    t = flow.asyncs.Thread()

    @flow.asyncs.thread(t)
    def f(x):
        return vm.current_worker().id, (x + 1).numpy()

    wid, val = f(flow.zeros(2))
    assert wid == t.worker_id
    np.testing.assert_array_equal(val, [1.0, 1.0])
    assert vm.current_worker().id == 0


def test_rejects_non_thread():
    with pytest.raises(TypeError, match="flow.asyncs.Thread"):
        flow.asyncs.thread(3)


@async_only
def test_instructions_run_on_the_selected_worker_thread():
    t = flow.asyncs.Thread()
    names = []
    _ran_on(names)
    with flow.asyncs.thread(t):
        _ran_on(names)
    flow.synchronize()
    # two workers, no data dependency: either may run first
    assert sorted(names) == sorted(["actorflow-vm-worker-0",
                                    f"actorflow-vm-worker-{t.worker_id}"])


def test_stream_kinds_under_one_worker_share_its_thread_in_issue_order():
    t = flow.asyncs.Thread()
    log = []
    with flow.asyncs.thread(t):
        w = vm.current_worker()
        vm.launch(lambda: (time.sleep(0.1), log.append(("compute", threading.get_ident()))),
                  stream="compute")
        vm.launch(lambda: log.append(("copy", threading.get_ident())), stream="copy")
    flow.synchronize()
    assert [k for k, _ in log] == ["compute", "copy"]
    assert log[0][1] == log[1][1]
    assert w.stream("copy") is w.streams["copy"]
    with pytest.raises(ValueError, match="unknown stream kind"):
        w.stream("nccl")


@async_only
def test_different_workers_are_ordered_only_by_data():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    gate = threading.Event()
    with flow.asyncs.thread(a):
        blocker = vm.launch(lambda: gate.wait(5), name="blocked")
    with flow.asyncs.thread(b):
        y = flow.ones(10_000) * 3   # independent of the blocked instruction
    assert y.numpy()[0] == 3.0      # completes while worker a is still blocked
    assert not blocker.done
    gate.set()
    flow.synchronize()


@async_only
def test_independent_work_on_two_workers_overlaps():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    t0 = time.perf_counter()
    for th in (a, b):
        with flow.asyncs.thread(th):
            vm.launch(lambda: time.sleep(0.3), name="sleep")
    flow.synchronize()
    both = time.perf_counter() - t0
    t0 = time.perf_counter()
    with flow.asyncs.thread(a):
        vm.launch(lambda: time.sleep(0.3), name="sleep")
        vm.launch(lambda: time.sleep(0.3), name="sleep")
    flow.synchronize()
    serial = time.perf_counter() - t0
    assert both < 0.5 <= serial


def test_two_matmul_chains_on_two_workers_give_the_same_values():
    rng = np.random.default_rng(0)
    m = [flow.tensor(rng.standard_normal((64, 64)).astype(np.float32) / 8) for _ in range(2)]

    def chain(x, w, n=20):
        for _ in range(n):
            x = flow.tanh(flow.matmul(x, w))
        return x

    ref = [chain(m[0], m[1]).numpy(), chain(m[1], m[0]).numpy()]
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    with flow.asyncs.thread(a):
        ya = chain(m[0], m[1])
    with flow.asyncs.thread(b):
        yb = chain(m[1], m[0])
    np.testing.assert_array_equal(ya.numpy(), ref[0])
    np.testing.assert_array_equal(yb.numpy(), ref[1])


def test_training_under_a_worker_thread():
    flow.manual_seed(0)
    net = flow.nn.Linear(4, 1)
    opt = flow.optim.SGD(net.parameters(), lr=0.1)
    x = flow.randn(64, 4)
    y = x.sum(dim=1, keepdim=True)
    t = flow.asyncs.Thread()
    first = None
    for _ in range(50):
        with flow.asyncs.thread(t):
            loss = flow.nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < first * 0.05  # the eager op outside the block sees every update
