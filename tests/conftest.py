"""Shared test setup: one BLAS thread, every test ends with the VM drained (a kernel error that
no sync point reported fails the test that caused it, not a later one), and graphs left behind
by a test module are collected before the next module runs."""
from __future__ import annotations

import compileall
import gc
import os

# One BLAS thread per caller: the suite runs actor, VM and data-loader threads next to the main
# thread on a 2-core machine, and BLAS thread pools on top of them make small matmuls take
# milliseconds. Set before NumPy is first imported (benchmarks measure BLAS at its default).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import actorflow as flow  # noqa: E402


def pytest_sessionstart(session) -> None:
    """Byte-compile the repository's packages once. The suite starts hundreds of Python
    processes (ranks, launchers, examples); where PYTHONDONTWRITEBYTECODE is set (as on this
    project's CI machines) none writes its bytecode, and each would compile actorflow's ~350
    modules again: about 1 s of CPU per process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for package in ("actorflow", "tests", "examples", "benchmarks"):
        compileall.compile_dir(os.path.join(root, package), quiet=2)


@pytest.fixture(autouse=True)
def _vm_drained():
    yield
    flow.synchronize()


@pytest.fixture(autouse=True, scope="module")
def _collect_graphs_between_modules():
    """Graphs hold actor runtimes (threads) until they are garbage-collected; collecting after
    each test module keeps one module's runtimes from ending inside another module's
    thread-count checks."""
    yield
    gc.collect()
