"""The VM narrows BLAS's threads while the caller runs Python and widens them while it waits."""
import threading
import time

import pytest

import actorflow as flow
from actorflow import vm
from actorflow.ops.blas import ADAPTIVE_VAR, BlasThreads, blas_threads

pytestmark = [pytest.mark.timeout(30),
              pytest.mark.skipif(not blas_threads.available, reason="no OpenBLAS found")]


@pytest.fixture
def two_blas_threads():
    flow.synchronize()
    before = blas_threads.full
    blas_threads.set_full(2)
    yield
    flow.synchronize()
    blas_threads.set_full(before)


def _wait_until(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("condition not reached")
        time.sleep(0.005)


def test_worker_kernel_gets_one_thread_while_caller_runs(two_blas_threads):
    seen, release = [], threading.Event()

    def kernel():
        seen.append(blas_threads.get())
        release.wait(10)

    vm.launch(kernel, name="probe")
    _wait_until(lambda: seen)  # the caller polls without a VM wait: it is "running"
    release.set()
    flow.synchronize()
    assert seen == [1]
    assert blas_threads.get() == 2  # the idle worker gave every thread back


def test_worker_kernel_gets_all_threads_while_caller_waits(two_blas_threads):
    seen, release = [], threading.Event()
    vm.launch(lambda: release.wait(10), name="hold")
    probe = vm.launch(lambda: seen.append(blas_threads.get()), name="probe")
    timer = threading.Timer(0.2, release.set)
    timer.start()
    vm.wait(probe)  # the caller waits before the probe starts
    timer.join()
    assert seen == [2]


def test_switch_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(ADAPTIVE_VAR, "0")
    b = BlasThreads()
    assert not b.enabled
    b.use(narrow=True)
    assert b.current == b.full


def test_set_full_rejects_nonsense():
    with pytest.raises(ValueError, match="must be >= 1"):
        blas_threads.set_full(0)
