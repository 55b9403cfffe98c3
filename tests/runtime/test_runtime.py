"""The actor runtime: protocol (threads, readiness, acks, pipelining), shutdown, errors."""
import gc
import threading
import time

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn.functional as F
from tests.helpers import fail_if_negative_op, slow_actors
from actorflow import profiler
from actorflow.compiler import CompileOptions, compile_job, decode_task_id
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.job.executor import ReferenceExecutor
from actorflow.runtime import Buffer, BufferStatus, Runtime, RuntimeAborted
from actorflow.runtime import actors as actor_mod
from actorflow.runtime.executor import RuntimeExecutor


def chain_job(n: int = 5, fail_op: bool = False):
    x = flow.ones(4)
    b = LazyInterpreter("chain")
    with b:
        h = b.add_input(0, "x", x)
        for _ in range(n):
            h = h * 2.0
        if fail_op:
            from actorflow import scope
            from actorflow.dispatch import apply
            with scope.module_scope("model.block"):
                h = apply(fail_if_negative_op(), [h], {})[0]
        b.add_output(0, "y", h)
    return b.job


# -- Buffer ------------------------------------------------------------------------------------

@pytest.mark.timeout(10)
def test_buffer_statuses():
    b = Buffer()
    assert b.try_pull() == (BufferStatus.EMPTY, None)
    assert b.push(1) is BufferStatus.SUCCESS
    assert b.pull() == (BufferStatus.SUCCESS, 1)
    assert b.pull(timeout=0.01) == (BufferStatus.EMPTY, None)
    b.push(2)
    b.close()
    assert b.push(3) is BufferStatus.CLOSED
    assert b.pull() == (BufferStatus.SUCCESS, 2)  # items pushed before close still come out
    assert b.pull() == (BufferStatus.CLOSED, None)
    assert b.try_pull() == (BufferStatus.CLOSED, None)


@pytest.mark.timeout(10)
def test_buffer_close_wakes_a_blocked_pull():
    b = Buffer()
    got = []
    t = threading.Thread(target=lambda: got.append(b.pull()))
    t.start()
    time.sleep(0.05)
    b.close()
    t.join(2)
    assert not t.is_alive() and got == [(BufferStatus.CLOSED, None)]


# -- protocol ------------------------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_runs_and_matches_reference():
    job = chain_job(6)
    rx = RuntimeExecutor(job)
    x = np.arange(4, dtype=np.float32)
    out = rx.run([x], {})[0]
    assert np.array_equal(out, ReferenceExecutor(job).run([x], {})[0])
    assert np.array_equal(out, x * 64)
    rx.close()


@pytest.mark.timeout(30)
def test_actors_run_on_the_threads_their_task_ids_name():
    job = chain_job(3)
    rx = RuntimeExecutor(job)
    with profiler.profile() as prof:
        rx.run([np.ones(4, np.float32)], {})
    rx.close()
    assert prof.events
    for e in prof.acts():
        task = rx.plan.task(e["actor"])
        stream = decode_task_id(task.task_id).stream
        assert e["thread"].endswith(stream), (e, stream)
    kinds = {e["kind"]: e["thread"] for e in prof.acts()}
    assert kinds["input"].endswith("/io") and kinds["normal"].endswith("/compute")


@pytest.mark.timeout(30)
def test_no_act_without_read_and_write_readiness(monkeypatch):
    """Every act (general or light path) finds a register from each consumed regst desc and
    writes a register no consumer is still reading."""
    violations, acted = [], []
    real_act, real_compute = actor_mod.Actor.act, actor_mod.KernelActor.compute

    def checked_act(self):
        if not self.read_ready() or not self.write_ready():
            violations.append(self.task.op_name)
        return real_act(self)

    def checked_compute(self, ins, out):
        acted.append(self.task.op_name)
        if not self.read_ready() or id(out) in self.reading:
            violations.append(self.task.op_name)
        if any(self.inbox[rid][0] is not r for rid, r in zip(self.in_rids, ins)):
            violations.append(self.task.op_name)
        return real_compute(self, ins, out)

    monkeypatch.setattr(actor_mod.Actor, "act", checked_act)
    monkeypatch.setattr(actor_mod.KernelActor, "compute", checked_compute)
    job = chain_job(8)
    for regst_num in (1, 2):  # the light path, then the general actor
        rx = RuntimeExecutor(job, CompileOptions(regst_num=regst_num))
        futs = [rx.launch([np.ones(4, np.float32)], {}) for _ in range(6)]
        for f in futs:
            f.result(10)
        kernels = {type(a) for t in rx.runtime.threads.values() for a in t.actors.values()
                   if a.task.kind == "normal"}
        rx.close()
        assert kernels == ({actor_mod.LightKernelActor} if regst_num == 1
                           else {actor_mod.KernelActor})
    assert violations == []
    assert len(acted) == 2 * 6 * 8  # every kernel op of the 6 iterations, in both runs


@pytest.mark.timeout(30)
def test_registers_come_back_through_acks():
    job = chain_job(4)
    rx = RuntimeExecutor(job, CompileOptions(regst_num=2))
    for f in [rx.launch([np.ones(4, np.float32)], {}) for _ in range(5)]:
        f.result(10)
    rt = rx.runtime
    time.sleep(0.05)
    actors = [a for t in rt.threads.values() for a in t.actors.values()]
    assert actors
    for a in actors:
        if isinstance(a, actor_mod.SourceActor):
            continue
        assert a.total_reading == 0, a.task.op_name
        assert len(a.free) == a.out_desc.regst_num, a.task.op_name
    rx.close()


@pytest.mark.timeout(30)
def test_two_iterations_in_flight_with_a_slow_input_stage(monkeypatch):
    slow_actors(monkeypatch)
    job = chain_job(1)
    rx = RuntimeExecutor(job, CompileOptions(input_regst_num=2))
    with profiler.profile() as prof:
        futs = [rx.launch([np.ones(4, np.float32)], {}) for _ in range(4)]
        for f in futs:
            f.result(10)
    rx.close()
    acts = prof.acts()
    inputs = {e["iteration"]: e for e in acts if e["kind"] == "input"}
    computes = {e["iteration"]: e for e in acts if e["kind"] == "normal"}
    overlapped = [k for k in computes if k + 1 in inputs
                  and inputs[k + 1]["start"] < computes[k]["end"]
                  and inputs[k + 1]["end"] > computes[k]["start"]]
    assert overlapped, "the input of iteration k+1 should run while iteration k computes"


@pytest.mark.timeout(30)
def test_no_output_allocation_in_steady_state():
    import tracemalloc

    w = flow.nn.Parameter(flow.randn(64, 64))
    b = LazyInterpreter("mm", {id(w): ("w", "parameter", w)})
    x = flow.randn(32, 64)
    with b:
        h = b.add_input(0, "x", x)
        for _ in range(5):
            h = F.relu(F.linear(h, w))
        b.add_output(0, "y", h.sum())
    rx = RuntimeExecutor(b.job)
    xa = x.numpy()
    for _ in range(5):
        rx.run([xa], b.bindings)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(100):
        rx.run([xa], b.bindings)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    rx.close()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0)
    # one (32, 64) float32 activation is 8 KiB: 100 iterations allocating even one would be 800 KiB
    assert grown < 64 * 1024, grown


# -- shutdown and errors -----------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_close_with_queued_calls_is_quick_and_leaks_no_thread():
    before = settled_thread_count()
    job = chain_job(20)
    rx = RuntimeExecutor(job)
    futs = [rx.launch([np.ones(4, np.float32)], {}) for _ in range(10)]
    t0 = time.perf_counter()
    rx.close(timeout=5)
    assert time.perf_counter() - t0 < 5
    for f in futs:
        assert f.done()
        f.result(1)  # every queued call was finished before the orderly shutdown
    assert threading.active_count() == before


def settled_thread_count() -> int:
    """The thread count once runtimes left behind by earlier tests are collected."""
    gc.collect()
    deadline = time.time() + 5
    n = threading.active_count()
    while time.time() < deadline:
        time.sleep(0.02)
        m = threading.active_count()
        if m == n:
            return n
        n = m
    return n


@pytest.mark.timeout(60)
def test_many_runtimes_leak_no_threads():
    before = settled_thread_count()
    job = chain_job(2)
    for _ in range(100):
        rx = RuntimeExecutor(job)
        rx.run([np.ones(4, np.float32)], {})
        del rx
    gc.collect()
    deadline = time.time() + 5
    while threading.active_count() != before and time.time() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before


@pytest.mark.timeout(30)
def test_kernel_error_names_op_and_module_and_runtime_recovers():
    before = settled_thread_count()
    job = chain_job(2, fail_op=True)
    rx = RuntimeExecutor(job)
    assert np.array_equal(rx.run([np.ones(4, np.float32)], {})[0], np.full(4, 4.0))
    with pytest.raises(RuntimeError, match=r"_test_fail_if_negative.*model\.block.*negative"):
        rx.run([-np.ones(4, np.float32)], {})
    old = rx.runtime
    old.join(5)
    assert old.aborted
    # the next call builds a fresh runtime
    assert np.array_equal(rx.run([np.ones(4, np.float32)], {})[0], np.full(4, 4.0))
    rx.close()
    assert threading.active_count() == before


@pytest.mark.timeout(30)
def test_calls_in_flight_behind_a_failure_are_aborted():
    job = chain_job(2, fail_op=True)
    rx = RuntimeExecutor(job)
    futs = [rx.launch([-np.ones(4, np.float32)], {})] + \
        [rx.launch([np.ones(4, np.float32)], {}) for _ in range(3)]
    with pytest.raises(RuntimeError, match="negative"):
        futs[0].result(10)
    for f in futs[1:]:
        with pytest.raises(RuntimeError):
            f.result(10)
    with pytest.raises(RuntimeAborted):
        rx.runtime.launch([np.ones(4, np.float32)], {})
    rx.close()


@pytest.mark.timeout(30)
def test_missing_binding_fails_at_construction():
    w = flow.nn.Parameter(flow.ones(3))
    b = LazyInterpreter("v", {id(w): ("w", "parameter", w)})
    with b:
        b.add_output(0, "y", b.add_input(0, "x", flow.ones(3)) * w)
    plan = compile_job(b.job)
    before = settled_thread_count()
    with pytest.raises(RuntimeError, match="no tensor bound"):
        Runtime(plan, {})
    assert threading.active_count() == before


@pytest.mark.timeout(30)
def test_per_call_overrides_of_a_variable():
    """A call in flight keeps the value it was launched with (how a graph passes each call's
    learning rate)."""
    w = flow.nn.Parameter(flow.ones(3))
    b = LazyInterpreter("ov", {id(w): ("w", "parameter", w)})
    with b:
        b.add_output(0, "y", b.add_input(0, "x", flow.ones(3)) * w)
    rx = RuntimeExecutor(b.job)
    x = np.ones(3, np.float32)
    futs = [rx.launch([x], b.bindings, {"w": np.full(3, float(k), np.float32)})
            for k in range(5)]
    futs.append(rx.launch([x], b.bindings))
    outs = [f.result(10)[0] for f in futs]
    rx.close()
    for k in range(5):
        assert np.array_equal(outs[k], np.full(3, float(k)))
    assert np.array_equal(outs[5], np.ones(3))
