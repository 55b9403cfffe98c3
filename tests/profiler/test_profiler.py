"""``flow.profiler.profile``: nested and concurrent profiles, VM instructions, trace export.

Every profile records what ran while it was recording: an outer profile includes the events
of a profile nested in it, and profiles open on two threads each get the events of their own
time span. Work is synchronised inside each span so that what ran when is deterministic.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

import actorflow as flow
from actorflow import nn, profiler, vm
from tests.helpers import FnGraph

ASYNC_ONLY = pytest.mark.skipif(vm.is_blocking(), reason="blocking mode runs kernels inline")


def names(prof) -> list:
    return [e["name"] for e in prof.instructions()]


def export(prof, path) -> dict:
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f)


def graph_and_input():
    flow.manual_seed(0)
    lin = nn.Linear(8, 4)
    g = FnGraph(lin)
    x = flow.randn(3, 8)
    want = x.numpy() @ lin.weight.numpy().T + lin.bias.numpy()
    np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-6)  # compiled
    return g, x, want


def iterations(prof) -> set:
    return {e["iteration"] for e in prof.acts()}


@pytest.mark.timeout(30)
def test_nested_profiles_of_eager_ops():
    x = flow.randn(64, 64)
    flow.synchronize()
    with profiler.profile() as outer:
        (x + 1.0).numpy()
        with profiler.profile() as inner:
            (x * 2.0).numpy()
            assert names(inner) == ["scalar_mul"]  # visible while recording
        (x - 1.0).numpy()
        with profiler.profile() as second:  # a second inner span, after the first closed
            flow.exp(x).numpy()
    assert names(inner) == ["scalar_mul"]
    assert names(second) == ["exp"]
    assert names(outer) == ["scalar_add", "scalar_mul", "scalar_sub", "exp"]
    assert set(inner.events) <= set(outer.events) and set(second.events) <= set(outer.events)
    assert not outer.recording and profiler.ACTIVE is None  # nothing records any more
    (x + 2.0).numpy()
    assert len(outer.events) == 4


@pytest.mark.timeout(60)
def test_nested_profiles_of_graph_calls(tmp_path):
    g, x, want = graph_and_input()
    with profiler.profile() as outer:
        np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-6)
        with profiler.profile() as inner:
            np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-6)
    plan = g.plan
    # every task acted once per call: three calls in the outer profile, one in the inner
    assert len(iterations(outer)) == 3 and len(iterations(inner)) == 1
    assert iterations(inner) < iterations(outer)
    assert len(outer.acts()) == 3 * len(plan.tasks) and len(inner.acts()) == len(plan.tasks)
    assert set(inner.events) <= set(outer.events)
    assert names(outer).count(f"{g.name}-call") == 3 and names(inner) == [f"{g.name}-call"]
    for prof, calls in ((outer, 3), (inner, 1)):
        trace = export(prof, tmp_path / f"trace{calls}.json")
        slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert len(slices) == len(prof.events)
        arrows = [e for e in trace["traceEvents"] if e["ph"] == "s"]
        assert len(arrows) == calls * sum(len(r.consumers) for r in plan.regst_descs.values())
        assert min(e["ts"] for e in slices) >= 0  # times from the profile's own start
    g.close()


@pytest.mark.timeout(60)
def test_profiles_on_two_threads_each_record_their_own_span(tmp_path):
    """A opens, B opens, B runs op 1, A closes, B runs op 2 and a graph call, B closes: A saw
    op 1 only; B saw everything; closing A did not stop B's recording."""
    g, x, want = graph_and_input()
    a_in, b_did, a_out = threading.Event(), threading.Event(), threading.Event()
    profs, errors = {}, []

    def thread_a():
        try:
            with profiler.profile() as p:
                profs["a"] = p
                a_in.set()
                assert b_did.wait(10)
            a_out.set()
        except BaseException as e:
            errors.append(e)
            a_out.set()

    def thread_b():
        try:
            assert a_in.wait(10)
            with profiler.profile() as p:
                profs["b"] = p
                (x * 3.0).numpy()
                b_did.set()
                assert a_out.wait(10)
                (x + 5.0).numpy()
                np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-6)
        except BaseException as e:
            errors.append(e)
            b_did.set()

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    a, b = profs["a"], profs["b"]
    assert names(a) == ["scalar_mul"] and not a.acts()
    assert names(b) == ["scalar_mul", "scalar_add", f"{g.name}-call"]
    assert len(b.acts()) == len(g.plan.tasks)
    for p in (a, b):  # each span's events lie inside it
        assert all(p.t0 <= e[6] <= e[7] <= p.t1 for e in p.events)
    assert a.t1 < b.t1
    for p, path in ((a, "a.json"), (b, "b.json")):
        trace = export(p, tmp_path / path)
        assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == len(p.events)
    assert profiler.ACTIVE is None
    g.close()


@pytest.mark.timeout(30)
def test_overlapping_spans_handing_over_forget_what_no_one_needs():
    """Profiles that overlap in a chain (each opens before the previous closes) keep the
    shared log alive; it still drops the events every open profile started after."""
    x = flow.randn(16, 16)
    flow.synchronize()
    p = profiler.profile().__enter__()
    first = p
    got = []
    for i in range(20):
        (x + float(i)).numpy()
        nxt = profiler.profile().__enter__()
        p.__exit__(None, None, None)
        got.append(names(p))
        p = nxt
    log = profiler.ACTIVE
    assert log is not None and len(log.events) <= 1  # not every event since the first opened
    p.__exit__(None, None, None)
    assert profiler.ACTIVE is None
    assert got == [["scalar_add"]] * 20 and names(p) == []
    assert len(first.events) == 1


@pytest.mark.timeout(30)
def test_a_profile_object_records_one_span_at_a_time():
    x = flow.randn(8)
    flow.synchronize()
    p = profiler.profile()
    with p:
        with pytest.raises(RuntimeError, match="already recording"):
            p.__enter__()
        (x * 2.0).numpy()
    assert names(p) == ["scalar_mul"]
    with p:  # entered again: starts afresh
        (x + 1.0).numpy()
    assert names(p) == ["scalar_add"]
    assert profiler.ACTIVE is None


@ASYNC_ONLY
@pytest.mark.timeout(30)
def test_instructions_are_recorded_on_the_thread_that_ran_them():
    x = flow.randn(256, 256)  # big enough to be queued, not run inline
    flow.synchronize()
    worker = flow.asyncs.Thread()
    with profiler.profile() as p:
        y = x * 2.0
        with flow.asyncs.thread(worker):
            z = x + 1.0
        flow.synchronize()
    assert y.numpy()[0, 0] == x.numpy()[0, 0] * 2
    assert z.numpy()[0, 0] == pytest.approx(x.numpy()[0, 0] + 1)
    threads = {e["name"]: e["thread"] for e in p.instructions()}
    assert threads == {"scalar_mul": "actorflow-vm-worker-0",
                       "scalar_add": f"actorflow-vm-worker-{worker.worker_id}"}
    del worker


@pytest.mark.timeout(30)
def test_a_failing_instruction_is_recorded_and_the_error_still_reported():
    from actorflow.dispatch import apply
    from tests.helpers import fail_if_negative_op
    x = flow.full((4,), -1.0)
    flow.synchronize()
    with profiler.profile() as p:
        with pytest.raises(vm.KernelError, match="negative input"):
            apply(fail_if_negative_op(), [x], {})[0].numpy()
    assert names(p) == ["_test_fail_if_negative"]
