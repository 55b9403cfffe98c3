"""What finished VM instructions keep alive: nothing but their done flag, name and error.

Workers remember their last few thousand queued instructions (for waiting and throttling) and
each storage its last writer, so anything a finished instruction still referenced - its
callable and closure, its arrays, a graph's compiled state, the frames of a kernel that raised
- would stay alive long after its user dropped it. These tests drop graphs, tensors and failed
results and check with weak references that they are gone at once (by reference counting, with
the cyclic collector switched off), not thousands of instructions later.
"""
from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import actorflow as flow
from actorflow import nn, vm
from actorflow.dispatch import apply
from actorflow.vm import scheduler
from tests.helpers import FnGraph, SquareLossTrain, fail_if_negative_op

BIG = 1 << 20  # float32 elements: 4 MiB arrays


class NoCycleCollection:
    """Context: the cyclic garbage collector is off, so whatever is freed inside was freed by
    reference counting, i.e. as soon as its last user let go."""

    def __enter__(self):
        gc.collect()
        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False


def runtime_threads() -> list:
    """Threads of actor runtimes (not the process-wide VM workers, intra-op pool or data
    loader threads)."""
    shared = ("actorflow-vm-", "actorflow-intra-op-", "actorflow-dataloader-")
    return [t for t in threading.enumerate()
            if t.name.startswith("actorflow-") and not t.name.startswith(shared)]


def wait_no_runtime_threads(timeout: float = 5.0) -> list:
    deadline = time.time() + timeout
    while runtime_threads() and time.time() < deadline:
        time.sleep(0.01)
    return runtime_threads()


def _graph_refs(g) -> list:
    """Weak references to a graph, its compiled signatures, their executors and runtimes, and
    the runtimes' register memory."""
    refs = [weakref.ref(g)]
    for compiled in g._cache.values():
        refs.append(weakref.ref(compiled))
        refs.append(weakref.ref(compiled.executor))
        rt = getattr(compiled.executor, "runtime", None)
        if rt is not None:
            refs.append(weakref.ref(rt))
            refs += [weakref.ref(a) for a in rt.blocks]
    return refs


def _dead_after_collection(refs: list) -> list:
    gc.collect()
    return [r for r in refs if r() is not None]


@pytest.mark.timeout(120)
def test_deleted_inference_graphs_are_freed_at_once():
    """The graph, its compiled state, executor, runtime and register memory go when the graph
    is deleted, and its runtime's threads were joined; the parameters it was bound to go with
    the next collection (tracing leaves cyclic garbage that references them) - before, every
    compiled graph stayed reachable from the VM worker's memory of its last 4,096
    instructions."""
    assert not wait_no_runtime_threads(), "runtime threads left by an earlier test"
    x = flow.randn(4, 32)
    alive, params = [], []
    with NoCycleCollection():
        for i in range(60):
            lin = nn.Linear(32, 32)
            params.append(weakref.ref(lin.weight._h.raw))
            g = FnGraph(lin)
            want = x.numpy() @ lin.weight.numpy().T + lin.bias.numpy()
            np.testing.assert_allclose(g(x).numpy(), want, rtol=1e-5, atol=1e-5)
            refs = _graph_refs(g)
            assert len(refs) >= 5  # graph, compiled, executor, runtime, its memory
            del g, lin
            alive += [r for r in refs if r() is not None]
            # the graph's runtime threads were joined when it was freed
            assert not runtime_threads(), (i, runtime_threads())
    assert not alive, alive[:5]
    assert not _dead_after_collection(params)


@pytest.mark.timeout(120)
def test_deleted_training_graphs_are_freed_at_once():
    flow.manual_seed(0)
    x = flow.randn(8, 16)
    alive, state = [], []
    with NoCycleCollection():
        for _ in range(20):
            model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
            opt = flow.optim.Adam(model.parameters(), lr=1e-2)
            g = SquareLossTrain(model, opt)
            losses = [float(g(x).numpy()) for _ in range(3)]
            assert losses[2] < losses[0]  # it trained
            alive += _graph_refs(g)
            state += [weakref.ref(model), weakref.ref(opt), weakref.ref(model[0].weight._h.raw)]
            del g, model, opt
            alive = [r for r in alive if r() is not None]
            assert not runtime_threads()
    assert not alive, alive[:5]
    assert not _dead_after_collection(state)


@pytest.mark.timeout(60)
def test_a_graph_deleted_with_a_call_in_flight_finishes_it_and_is_freed():
    lin = nn.Linear(8, 8)
    x = flow.randn(2, 8)
    with NoCycleCollection():
        g = FnGraph(lin)
        g(x).numpy()  # compiled, runtime started
        refs = _graph_refs(g)
        out = g(x)    # maybe still running
        del g
        assert all(r() is None for r in refs)
        assert not runtime_threads()
        want = x.numpy() @ lin.weight.numpy().T + lin.bias.numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.timeout(60)
def test_big_arrays_of_finished_eager_ops_are_freed_at_once():
    with NoCycleCollection():
        refs = []
        for i in range(20):
            a = flow.ones(BIG)
            b = a * float(i)
            c = flow.exp(b).sum()  # a reduction reading b: b's reader list remembers it
            refs += [weakref.ref(a._h.raw), weakref.ref(b._h.raw)]
            assert c.item() == pytest.approx(BIG * np.exp(float(i)), rel=1e-4)
            del a, b, c
        flow.synchronize()
        # (the worker's tail of finished instructions may still remember them)
        assert all(r() is None for r in refs)


@pytest.mark.timeout(60)
def test_finished_instructions_hold_no_callable_args_or_chain():
    lin = nn.Linear(4, 4)
    g = FnGraph(lin)
    x = flow.randn(2, 4)
    y = g(x)
    z = x * 3.0
    flow.synchronize()
    for t in (y, z):
        ins = t._h.storage.writer
        assert ins.done and ins.error is None
        assert ins.fn is None and ins.args is None and ins.chain is None
        assert ins.after is None and ins.war is None
        assert ins.stack is None and ins.shapes is None
        assert ins.waiters is None  # the locks of the threads that waited for it
    g.close()


@pytest.mark.timeout(30)
def test_threads_that_waited_leave_no_locks_behind():
    t = flow.zeros(4)
    ins = vm.launch(lambda: time.sleep(0.05), writes=[t], name="slow")
    t.numpy()  # waits for it (async mode: registers a lock the completer releases)
    assert ins.done and ins.waiters is None


def _issue_failing(x):
    return apply(fail_if_negative_op(), [x], {})[0]


@pytest.mark.timeout(60)
def test_a_failed_kernel_keeps_its_error_but_not_its_arrays():
    """The error stays on the instruction (readers of the failed result raise it), but neither
    the failing kernel's frames nor the frames that reported it keep arrays alive."""
    with NoCycleCollection():
        x = flow.full((BIG,), -1.0)
        ref = weakref.ref(x._h.raw)
        if vm.is_blocking():
            with pytest.raises(vm.KernelError, match="negative input"):
                _issue_failing(x)
            failed = x._h.storage.readers[-1]
        else:
            y = _issue_failing(x)
            failed = y._h.storage.writer
            with pytest.raises(vm.KernelError, match="negative input") as info:
                y.numpy()
            # the user gets a copy; the kept error never carries the reporting frames
            assert info.value is not failed.error and failed.error.__traceback__ is None
            assert str(info.value) == str(failed.error)
            del info
            with pytest.raises(vm.KernelError, match="negative input"):  # raised again
                (y + 1).numpy()
            del y
        assert failed.done and isinstance(failed.error, vm.KernelError)
        assert isinstance(failed.error.__cause__, ValueError)
        del x
        assert ref() is None
    assert "negative input" in str(failed.error)


@pytest.mark.timeout(60)
def test_an_unreported_error_does_not_keep_the_kernel_inputs():
    if vm.is_blocking():
        pytest.skip("blocking mode reports every error at the call")
    with NoCycleCollection():
        x = flow.full((BIG,), -1.0)
        ref = weakref.ref(x._h.raw)
        y = _issue_failing(x)
        scheduler.wait_for(y._h.storage.writer)
        del x
        assert vm.unreported_errors()  # kept for the next sync point
        assert ref() is None
    with pytest.raises(vm.KernelError, match="negative input"):
        flow.synchronize()
    del y


@pytest.mark.timeout(60)
def test_reported_errors_print_their_kernel_traceback():
    """Frames whose locals were dropped still print file, line and function."""
    import traceback
    x = flow.full((4,), -1.0)
    with pytest.raises(vm.KernelError) as info:
        _issue_failing(x).numpy()
    text = "".join(traceback.format_exception(info.value))
    assert "negative input" in text and "raise ValueError" in text
