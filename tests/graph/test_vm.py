"""Graph calls go through the eager VM: asynchronous, ordered with eager ops by storage, several
in flight on the actor runtime."""
import time

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow import profiler
from actorflow.runtime import actors as actor_mod
from tests.helpers import SquareLossTrain, fail_if_negative_op


def _setup(seed=0):
    flow.manual_seed(seed)
    model = nn.Linear(8, 4)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    return model, opt, SquareLossTrain(model, opt)


def _slow(monkeypatch, cls, seconds):
    real = cls.compute

    def slow(self, ins, out):
        time.sleep(seconds)
        return real(self, ins, out)

    monkeypatch.setattr(cls, "compute", slow)


ASYNC_ONLY = pytest.mark.skipif(flow.vm.is_blocking(),
                                reason="ACTORFLOW_EAGER_BLOCKING=1 runs each call to completion")


@ASYNC_ONLY
@pytest.mark.timeout(30)
def test_a_call_returns_before_the_graph_finishes(monkeypatch):
    model, opt, g = _setup()
    x = flow.randn(2, 8)
    g(x).numpy()  # compile and start the runtime
    _slow(monkeypatch, actor_mod.LightKernelActor, 0.02)
    t0 = time.perf_counter()
    losses = [g(x) for _ in range(3)]
    issued = time.perf_counter() - t0
    values = [loss.numpy().item() for loss in losses]  # sync points
    done = time.perf_counter() - t0
    n_kernels = sum(t.kind == "normal" for t in g.plan.tasks)
    assert done >= 3 * n_kernels * 0.02
    assert issued < done / 3  # the caller was not held for the work
    assert values[0] > values[1] > values[2]  # each call saw the previous update


@pytest.mark.timeout(30)
def test_eager_read_of_a_parameter_waits_for_the_graph_update(monkeypatch):
    model, opt, g = _setup()
    x = flow.randn(2, 8)
    g(x).numpy()
    before = model.weight.numpy().copy()
    _slow(monkeypatch, actor_mod.LightKernelActor, 0.01)
    g(x)
    after = (model.weight * 1.0).numpy()  # an eager op issued right after the call
    assert not np.array_equal(before, after)
    flow.synchronize()
    assert np.array_equal(after, model.weight.numpy())


@pytest.mark.timeout(30)
def test_graph_calls_and_eager_ops_interleave_in_issue_order():
    def run(blocking):
        flow.vm.set_blocking(blocking)
        try:
            model, opt, g = _setup(3)
            x = flow.randn(2, 8)
            out = []
            for _ in range(3):
                out.append(g(x))
                with flow.no_grad():
                    model.weight.mul_(0.5)     # eager writes between the calls
                    model.bias.add_(model.weight.sum(1))
                out.append(g(x * 2.0))
            return [o.numpy().item() for o in out], model.weight.numpy().copy()
        finally:
            flow.vm.set_blocking(False)

    async_run, blocking_run = run(False), run(True)
    assert async_run[0] == blocking_run[0]
    assert np.array_equal(async_run[1], blocking_run[1])


@ASYNC_ONLY
@pytest.mark.timeout(30)
def test_several_calls_in_flight_overlap_input_and_compute(monkeypatch):
    """Consecutive calls of one graph are chained in the VM: call k+1 waits for call k to be
    launched, not finished, so the runtime's input stage of k+1 overlaps k's compute."""
    model, opt, g = _setup()
    x = flow.randn(2, 8)
    g(x).numpy()
    _slow(monkeypatch, actor_mod.InputActor, 0.02)
    _slow(monkeypatch, actor_mod.LightKernelActor, 0.005)
    with profiler.profile() as prof:
        losses = [g(x) for _ in range(4)]
        flow.synchronize()
    assert all(np.isfinite(loss.numpy()) for loss in losses)
    acts = prof.acts()
    inputs = {e["iteration"]: e for e in acts if e["kind"] == "input"}
    kernels: dict = {}
    for e in acts:
        if e["kind"] == "normal":
            kernels.setdefault(e["iteration"], []).append(e)
    overlapped = [k for k in kernels if k + 1 in inputs
                  and any(inputs[k + 1]["start"] < e["end"] and inputs[k + 1]["end"] > e["start"]
                          for e in kernels[k])]
    assert overlapped


@pytest.mark.timeout(30)
def test_graph_error_surfaces_at_the_next_sync_point():
    from actorflow.dispatch import apply
    op = fail_if_negative_op()

    class G(nn.Graph):
        def build(self, x):
            return apply(op, [x * 1.0], {})[0]

    g = G()
    assert np.array_equal(g(flow.ones(3)).numpy(), np.ones(3))
    with pytest.raises(RuntimeError, match=f"{op.name}.*negative input"):
        out = g(-flow.ones(3))  # returns at once (raises here only in blocking mode)
        out.numpy()
    assert np.array_equal(g(flow.ones(3) * 2).numpy(), np.full(3, 2.0))
