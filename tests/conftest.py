"""Shared test setup."""
import gc
import os

# One BLAS thread per caller: the suite runs actor and data-loader threads next to the main
# thread on a 2-core machine, and BLAS thread pools on top of them make small matmuls take
# milliseconds. Set before NumPy is first imported (benchmarks measure BLAS at its default).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest


@pytest.fixture(autouse=True, scope="module")
def _collect_graphs_between_modules():
    """Graphs hold actor runtimes (threads) until they are garbage-collected; collecting after
    each test module keeps one module's runtimes from ending inside another module's
    thread-count checks."""
    yield
    gc.collect()
