"""Dispatch: one interpreter per thread (eager-local unless the thread is tracing a Graph), and
the autograd record made once after whichever interpreter ran."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow import scope
from actorflow.dispatch.lazy import LazyInterpreter, current_tracer

pytestmark = pytest.mark.timeout(30)


def test_a_thread_tracing_a_graph_does_not_capture_another_threads_ops():
    entered, release, seen = threading.Event(), threading.Event(), {}

    class Waits(nn.Graph):
        def build(self, x):
            entered.set()
            release.wait(10)  # another thread runs eager ops while this one traces
            return x * 2

    def other():
        entered.wait(10)
        seen["tracer"] = current_tracer()
        seen["value"] = (flow.ones(3) + 1).numpy().tolist()
        release.set()

    t = threading.Thread(target=other)
    t.start()
    out = Waits()(flow.ones(2))
    t.join(10)
    assert seen == {"tracer": None, "value": [2.0, 2.0, 2.0]}
    np.testing.assert_array_equal(out.numpy(), [2.0, 2.0])


def test_the_interpreter_is_per_thread_and_restored():
    assert scope.current_interpreter() is None
    tracer = LazyInterpreter("j")
    with tracer:
        assert current_tracer() is tracer
        with scope.interpreter_scope(None):  # eager inside (lazy_mode.guard(False))
            assert current_tracer() is None
            assert (flow.ones(1) * 3).numpy().tolist() == [3.0]
        assert current_tracer() is tracer
        with pytest.raises(RuntimeError, match="inside another graph"):
            with LazyInterpreter("k"):
                pass
    assert scope.current_interpreter() is None


def test_autograd_records_once_after_either_interpreter():
    x = flow.ones(3, requires_grad=True)
    y = x * 2
    assert y.grad_fn is not None and y.grad_fn.op.name == "scalar_mul"
    tracer = LazyInterpreter("j")
    with tracer:
        lx = tracer.add_input(0, "x", x)
        ly = lx * 2
        assert ly.grad_fn is not None and ly.grad_fn.op is y.grad_fn.op
    # in-place: the node sees the pre-op identity of the written tensor
    z = x * 1
    z.mul_(3)
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])
