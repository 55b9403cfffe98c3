"""Shared test setup."""
import gc

import pytest


@pytest.fixture(autouse=True, scope="module")
def _collect_graphs_between_modules():
    """Graphs hold actor runtimes (threads) until they are garbage-collected; collecting after
    each test module keeps one module's runtimes from ending inside another module's
    thread-count checks."""
    yield
    gc.collect()
