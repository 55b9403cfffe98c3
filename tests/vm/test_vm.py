"""The eager VM: asynchronous instructions, storage dependencies, sync points, errors.

Slow kernels are made with ``vm.launch`` (a callable that sleeps, then reads or writes a tensor's
memory), so ordering bugs show up as wrong values. Timing assertions only run in async mode;
every value assertion also holds with ACTORFLOW_EAGER_BLOCKING=1.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import REPO_ROOT
from actorflow import vm
from actorflow.tensor import Tensor
from actorflow.vm import scheduler

ROOT = REPO_ROOT
async_only = pytest.mark.skipif(vm.is_blocking(), reason="timing of the asynchronous mode")


def slow_fill(t, value, delay=0.15, log=None):
    """Issue: sleep, then fill ``t`` with ``value`` (a slow writer)."""
    arr = t._h.raw

    def fn():
        time.sleep(delay)
        arr[...] = value
        if log is not None:
            log.append(("fill", value))
    return vm.launch(fn, writes=[t], name="slow_fill")


def slow_snapshot(t, delay=0.15):
    """Issue: sleep, then copy ``t``'s values (a slow reader); returns (instruction, box)."""
    arr, box = t._h.raw, {}

    def fn():
        time.sleep(delay)
        box["v"] = arr.copy()
    return vm.launch(fn, reads=[t], name="slow_snapshot"), box


# ---- ordering by storage ----------------------------------------------------------------------

def test_read_after_write_same_worker():
    t = flow.zeros(1000)
    slow_fill(t, 5.0)
    y = t + 1
    np.testing.assert_array_equal(y.numpy(), np.full(1000, 6.0, np.float32))


def test_read_after_write_across_workers():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    t = flow.zeros(1000)
    with flow.asyncs.thread(a):
        slow_fill(t, 3.0)
    with flow.asyncs.thread(b):
        y = flow.matmul(t.reshape(10, 100), flow.ones(100, 2))
    np.testing.assert_allclose(y.numpy(), np.full((10, 2), 300.0))


def test_write_after_read_across_workers():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    t = flow.full((1000,), 1.0)
    with flow.asyncs.thread(a):
        _, box = slow_snapshot(t)
    with flow.asyncs.thread(b):
        t.fill_(7.0)  # must wait for the slow reader on the other worker
    flow.synchronize()
    np.testing.assert_array_equal(box["v"], np.ones(1000, np.float32))
    np.testing.assert_array_equal(t.numpy(), np.full(1000, 7.0, np.float32))


def test_write_after_write_across_workers():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    t = flow.zeros(1000)
    with flow.asyncs.thread(a):
        slow_fill(t, 1.0)
    with flow.asyncs.thread(b):
        t.add_(2.0)     # reads and writes: after the fill
        t.mul_(10.0)
    np.testing.assert_array_equal(t.numpy(), np.full(1000, 30.0, np.float32))


def test_write_after_write_pure_overwrite_across_workers():
    a, b = flow.asyncs.Thread(), flow.asyncs.Thread()
    t = flow.zeros(1000)
    with flow.asyncs.thread(a):
        slow_fill(t, 1.0, delay=0.2)
    with flow.asyncs.thread(b):
        slow_fill(t, 2.0, delay=0.0)
    flow.synchronize()  # both writes done: the later one must have landed last
    np.testing.assert_array_equal(t.numpy(), np.full(1000, 2.0, np.float32))


def test_in_stream_issue_order_without_data_dependencies():
    log = []
    for i in range(5):
        vm.launch(lambda i=i: (time.sleep(0.02 * (5 - i)), log.append(i)), name="ordered")
    flow.synchronize()
    assert log == [0, 1, 2, 3, 4]


def test_views_share_the_base_storage_record():
    t = flow.zeros(4, 5)
    v = t[1]
    assert v._h.storage is t._h.storage
    assert t.transpose(0, 1)._h.storage is t._h.storage
    slow_fill(t, 2.0)
    v.add_(1.0)  # a write through a view waits for the base's writer
    expect = np.full((4, 5), 2.0, np.float32)
    expect[1] += 1
    np.testing.assert_array_equal(t.numpy(), expect)


def test_reshape_that_must_copy_waits_for_its_input():
    t = flow.zeros(6, 4)
    slow_fill(t, 1.0)
    r = t.transpose(0, 1).reshape(24)  # not a view: copies once the fill is done
    np.testing.assert_array_equal(r.numpy(), np.ones(24, np.float32))


def test_inplace_with_autograd_saves_old_values_in_order():
    x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    slow_fill(y, 4.0)   # a slow write outside autograd, issued before mul_
    z = y.mul_(y)       # saves the old y (4.0) for backward
    z.sum().backward()
    np.testing.assert_allclose(z.numpy(), [16.0, 16.0, 16.0])
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 8.0, 8.0])


# ---- asynchrony and sync points ---------------------------------------------------------------

@async_only
def test_ops_return_before_their_kernels_run():
    t = flow.zeros(1000)
    slow_fill(t, 1.0, delay=0.3)
    t0 = time.perf_counter()
    y = (t + 1) * 2
    assert time.perf_counter() - t0 < 0.25
    assert not y._h.storage.writer.done
    np.testing.assert_array_equal(y.numpy(), np.full(1000, 4.0, np.float32))
    assert y._h.storage.writer.done


@pytest.mark.parametrize("read", [
    lambda t: t.numpy(), lambda t: t.sum().item(), lambda t: t.tolist(), repr,
    lambda t: bool(t.sum() > 0), lambda t: t[0] == 2, lambda t: flow.synchronize(),
])
def test_sync_points_wait_for_the_producer(read):
    t = flow.zeros(3)
    slow_fill(t, 2.0, delay=0.1)
    out = read(t)
    if isinstance(out, flow.Tensor):  # a comparison with a Python value: bool() syncs
        assert bool(out)
    assert t._h.storage.writer.done


def test_synchronize_waits_for_every_worker():
    a = flow.asyncs.Thread()
    done = []
    with flow.asyncs.thread(a):
        vm.launch(lambda: (time.sleep(0.1), done.append("a")), name="on_a")
    vm.launch(lambda: (time.sleep(0.05), done.append("0")), name="on_0")
    flow.synchronize()
    assert sorted(done) == ["0", "a"]


def test_numpy_waits_for_pending_readers_before_the_caller_writes():
    t = flow.ones(1000)
    _, box = slow_snapshot(t)
    a = t.numpy()      # waits for the reader too: the caller may write the array
    a[:] = 9.0
    flow.synchronize()
    np.testing.assert_array_equal(box["v"], np.ones(1000, np.float32))


def test_many_reads_of_one_storage_do_not_grow_its_reader_list():
    t = flow.ones(4)
    for _ in range(200):
        t + 1
    flow.synchronize()
    assert len(t._h.storage.readers) <= scheduler._PRUNE_AT


def test_random_ops_draw_seeds_on_the_caller_in_op_order():
    a = flow.asyncs.Thread()
    flow.manual_seed(3)
    with flow.asyncs.thread(a):
        x = flow.randn(5)
    y = flow.randn(5)
    flow.manual_seed(3)
    np.testing.assert_array_equal(x.numpy(), flow.randn(5).numpy())
    np.testing.assert_array_equal(y.numpy(), flow.randn(5).numpy())


def test_queue_depth_is_bounded(monkeypatch):
    monkeypatch.setattr(scheduler, "MAX_QUEUED", 8)
    w = vm.current_worker()
    t = flow.ones(100_000)  # not small: goes to the queue
    slow_fill(t, 1.0, delay=0.2)
    for _ in range(30):
        t = t + 1
        assert w.issued - w.finished <= 9
    assert t.numpy()[0] == 31.0


# ---- errors -----------------------------------------------------------------------------------

def _failing(exc=ValueError("boom")):
    def fn():
        raise exc
    return fn


def test_kernel_error_surfaces_at_the_next_sync_with_op_name_and_issuing_stack():
    x, box = flow.tensor([1, 2]), []
    with pytest.raises(RuntimeError, match="scalar_floor_divide: kernel failed") as e:
        box.append(x // 0)  # the failing call (blocking mode raises here)
        box[0].numpy()      # async mode: the sync point raises
    msg = str(e.value)
    assert "ZeroDivisionError" in msg and "(input shapes: (2,))" in msg
    assert __file__ in msg and "box.append(x // 0)  # the failing call" in msg
    assert isinstance(e.value, vm.KernelError)
    if box:
        with pytest.raises(vm.KernelError):  # the result stays failed
            box[0].numpy()
    flow.synchronize()  # reported once: nothing pending


def test_error_names_the_module_path():
    class Bad(flow.nn.Module):
        def forward(self, x):
            return flow.embedding(x, flow.ones(3, 2))

    net = flow.nn.Sequential(flow.nn.Identity(), Bad())
    with pytest.raises(vm.KernelError, match=r"embedding: kernel failed \[in module \w*\.?1\]"):
        net(flow.tensor([5])).numpy()


def test_error_surfaces_at_an_unrelated_sync_point_once():
    with pytest.raises(vm.KernelError, match="doomed: kernel failed.*ValueError: boom"):
        vm.launch(_failing(), name="doomed")
        flow.synchronize()
    flow.synchronize()  # already reported
    ok = flow.ones(2) + 1
    np.testing.assert_array_equal(ok.numpy(), [2.0, 2.0])


def test_ops_on_a_failed_result_raise_and_later_instructions_do_not_run():
    t, ran = Tensor._wrap(np.zeros(4, np.float32), flow.float32), []
    with pytest.raises(vm.KernelError, match="bad_writer"):
        vm.launch(_failing(), creates=[t], name="bad_writer")
        vm.launch(lambda: ran.append(1), reads=[t], name="reader")  # skipped (or refused)
        flow.synchronize()
    assert ran == []
    with pytest.raises(vm.KernelError, match="bad_writer"):  # an op on the failed result
        t + 1
    with pytest.raises(vm.KernelError, match="bad_writer"):
        t[1:]


def test_memory_written_in_place_by_a_failed_instruction_stays_usable():
    # a failure poisons what the instruction created, not what it wrote in place (parameters,
    # optimizer state): that memory gets its previous writer back
    t, ran = flow.full((4,), 3.0), []
    with pytest.raises(vm.KernelError, match="bad_writer"):
        vm.launch(_failing(), writes=[t], name="bad_writer")
        vm.launch(lambda: ran.append(1), reads=[t], name="reader")  # ordered after: skipped
        flow.synchronize()
    assert ran == []
    np.testing.assert_array_equal((t + 1).numpy(), [4.0] * 4)  # readable, old values
    t.add_(1)                                                   # writable
    np.testing.assert_array_equal(t.numpy(), [4.0] * 4)
    flow.synchronize()  # the error was reported once


def test_a_failed_in_place_op_leaves_its_tensor_usable():
    x = flow.tensor([1, 2], dtype=flow.int64)
    with pytest.raises(RuntimeError, match="floor_divide"):
        x.floor_divide_(0)
        x.numpy()
    np.testing.assert_array_equal((x + 1).numpy() >= 0, [True, True])  # readable again
    x.copy_(flow.tensor([5, 6]))
    np.testing.assert_array_equal(x.numpy(), [5, 6])


@async_only
def test_skipped_instructions_carry_the_original_error():
    t = flow.zeros(4)
    slow_fill(t, 1.0, delay=0.05)
    vm.launch(_failing(KeyError("k")), writes=[t], name="bad_writer")
    y = (t + 1) * 2   # issued before the failure is known: skipped at run time
    with pytest.raises(vm.KernelError, match="bad_writer.*KeyError"):
        y.numpy()
    np.testing.assert_array_equal(t.numpy(), [1.0] * 4)  # t itself keeps slow_fill's values


def test_error_in_a_graph_of_modules_during_training_step_surfaces():
    w = flow.ones(3, 2, requires_grad=True)
    idx = flow.tensor([0, 7])
    with pytest.raises(vm.KernelError, match="embedding"):
        out = flow.embedding(idx, w).sum()
        out.backward()
        out.item()


# ---- blocking mode ----------------------------------------------------------------------------

@pytest.fixture
def blocking():
    was = vm.is_blocking()
    vm.set_blocking(True)
    yield
    vm.set_blocking(was)


def test_blocking_mode_runs_each_kernel_before_the_op_returns(blocking):
    t = flow.zeros(10)
    ins = slow_fill(t, 1.0, delay=0.05)
    assert ins.done
    y = t + 1
    assert y._h.storage.writer.done
    with pytest.raises(vm.KernelError, match="scalar_floor_divide"):
        flow.tensor([1]) // 0  # raised at the call
    flow.synchronize()


def test_blocking_mode_from_the_environment():
    code = ("import actorflow as flow; from actorflow import vm; assert vm.is_blocking(); "
            "print((flow.ones(3) * 2).sum().item())")
    env = dict(os.environ, ACTORFLOW_EAGER_BLOCKING="1")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "6.0"


def test_same_results_in_blocking_and_async_modes():
    def run():
        flow.manual_seed(0)
        net = flow.nn.Sequential(flow.nn.Linear(8, 16), flow.nn.GELU(), flow.nn.Linear(16, 3))
        opt = flow.optim.Adam(net.parameters(), lr=0.01)
        x, y = flow.randn(32, 8), flow.randint(0, 3, (32,))
        losses = []
        for _ in range(5):
            loss = flow.nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
        return [v.item() for v in losses], net[0].weight.numpy().copy()

    was = vm.is_blocking()
    try:
        vm.set_blocking(False)
        a = run()
        vm.set_blocking(True)
        b = run()
    finally:
        vm.set_blocking(was)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])


# ---- the launch API (what a graph launch uses) --------------------------------------------------

def test_launch_orders_by_reads_and_writes():
    src, dst = flow.full((100,), 2.0), flow.zeros(100)
    slow_fill(src, 3.0)
    s, d = src._h.raw, dst._h.raw
    ins = vm.launch(lambda: np.multiply(s, 2, out=d), reads=[src], writes=[dst._h], name="g")
    assert (dst + 0).numpy()[0] == 6.0
    vm.wait(ins)
    with pytest.raises(TypeError, match="vm.launch"):
        vm.launch(lambda: None, reads=[np.zeros(2)])


def test_deferred_launch_completes_when_finish_is_called():
    param = flow.ones(4)
    result = flow.zeros(4)
    p, r = param._h.raw, result._h.raw

    def start(finish):
        def sink():  # another thread completes the work later
            time.sleep(0.1)
            p[...] += 1
            r[...] = p * 10
            finish()
        threading.Thread(target=sink).start()

    ins = vm.launch(start, reads=[], writes=[param, result], name="graph", deferred=True)
    y = param * 1       # an eager op reading a parameter the launch updates: waits
    np.testing.assert_array_equal(result.numpy(), np.full(4, 20.0, np.float32))
    np.testing.assert_array_equal(y.numpy(), np.full(4, 2.0, np.float32))
    assert ins.done and ins.error is None


def test_deferred_launch_failure_and_double_finish():
    out = flow.zeros(2)
    holder = []

    def start(finish):
        holder.append(finish)
        finish(RuntimeError("sink saw a bad batch"))
    with pytest.raises(vm.KernelError, match="graph: kernel failed.*sink saw a bad batch"):
        vm.launch(start, writes=[out], name="graph", deferred=True)
        out.numpy()
    with pytest.raises(RuntimeError, match="already called"):
        holder[0]()


def test_synchronize_waits_for_deferred_launches():
    out = flow.zeros(2)

    def start(finish):
        threading.Timer(0.1, finish).start()
    ins = vm.launch(start, writes=[out], name="graph", deferred=True)
    flow.synchronize()
    assert ins.done


# ---- threads and shutdown ---------------------------------------------------------------------

@async_only
@pytest.mark.timeout(20)
def test_a_launched_callable_waiting_on_later_work_of_its_worker_fails_instead_of_hanging():
    t = flow.zeros(10_000)
    gate = threading.Event()
    box = []

    def reader():
        gate.wait(5)
        try:
            box.append(t.numpy()[0])
        except RuntimeError as e:
            box.append(str(e))
    vm.launch(reader, name="reader")
    slow_fill(t, 1.0, delay=0.0)   # queued behind the reader on the same worker
    gate.set()
    flow.synchronize()
    assert "queued behind it on the same worker" in box[0]


def _async_env():
    return {k: v for k, v in os.environ.items() if k != vm.BLOCKING_VAR}


def test_worker_threads_are_daemons_and_exit_cleanly():
    code = ("import actorflow as flow\n"
            "t = flow.asyncs.Thread()\n"
            "with flow.asyncs.thread(t):\n"
            "    y = flow.ones(1000) * 3\n"
            "z = flow.ones(1000) + 1\n"
            "import threading\n"
            "assert all(th.daemon for th in threading.enumerate() if th.name.startswith("
            "'actorflow-vm'))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=_async_env())
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_unreported_errors_are_printed_at_exit():
    code = "import actorflow as flow\nx = flow.tensor([1]) // 0\n"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=_async_env())
    assert r.returncode == 0
    assert "never reported" in r.stderr and "scalar_floor_divide" in r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.timeout(60)
def test_fork_drains_first_and_the_child_gets_fresh_workers():
    t = flow.zeros(10_000)  # not small: the child's op goes to a (new) worker thread
    slow_fill(t, 4.0, delay=0.1)
    pid = os.fork()
    if pid == 0:  # the child: the fill happened before the fork; new ops run on new threads
        ok = False
        try:
            ok = float((t * 2).sum().item()) == 80_000.0
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert t.numpy()[0] == 4.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tuning")
def test_malloc_tuning_applies_and_can_be_turned_off():
    code = "import actorflow.vm.memory as m, actorflow; print(m.applied)"
    on = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                        text=True, timeout=60)
    off = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, **{vm.TUNING_VAR: "0"}))
    assert off.stdout.strip() == "False"
    import platform
    if platform.libc_ver()[0] == "glibc":
        assert on.stdout.strip() == "True"


def test_no_instruction_keeps_arrays_alive_after_it_ran():
    t = flow.ones(10)
    y = t * 2
    flow.synchronize()
    ins = y._h.storage.writer
    assert ins.fn is None and ins.args is None and ins.stack is None
    gc.collect()


@pytest.mark.timeout(20)
def test_an_instruction_writing_one_storage_twice_does_not_wait_for_itself():
    """A multi-tensor update naming one parameter twice lists its storage twice among the
    writes; the instruction runs (both updates, in order) instead of waiting on itself."""
    from actorflow.dispatch import apply
    from actorflow.ops.registry import get
    p, g = flow.ones(3), flow.full((3,), 2.0)
    lr = flow.tensor(0.5, dtype=flow.float64)
    apply(get("multi_tensor_update"), [lr, p, g, p, g],
          {"update": "sgd_update", "update_attrs": {"weight_decay": 0.0}, "arity": 2})
    np.testing.assert_array_equal(p.numpy(), [-1.0, -1.0, -1.0])  # 1 - 0.5*2, twice
