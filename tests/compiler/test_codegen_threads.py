"""A large generated kernel runs in chunks on ``ops/parallel``'s threads (the GIL released in
each ctypes call) and gives the bits of one chunk and of the NumPy kernel."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from actorflow.compiler import codegen
from actorflow.compiler.codegen.kernels import PARALLEL_MIN
from actorflow.framework import dtype as dt
from actorflow.ops import parallel, registry

pytestmark = pytest.mark.timeout(300)


def test_chunks_run_on_two_threads_and_agree_with_one_chunk():
    shape = (256, 4 * PARALLEL_MIN // 256)  # four times the parallel threshold
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1:]).astype(np.float32)  # broadcast over rows
    prog = {"ops": ["mul", "scalar_add"], "op_attrs": [{}, {"scalar": 0.5, "reverse": False}],
            "args": [[0, 1], [2]], "shapes": [shape, shape], "dtypes": [dt.float32] * 2,
            "exports": [1], "parts": ["mul", "scalar_add"]}
    (kernel,) = codegen.kernels_for([(prog, [(shape, dt.float32), (b.shape, dt.float32)])])
    assert kernel is not None
    want = np.empty(shape, np.float32)
    registry.get("fused_elementwise").kernel_cpu([a, b], [want], prog)

    real = kernel.fn
    seen: list = []
    both = threading.Barrier(2)

    def chunk(*args):
        me = threading.get_ident()
        if me not in seen:  # each thread's first chunk waits for the other thread's
            seen.append(me)
            both.wait(timeout=60)
        real(*args)

    before = parallel.threads()
    try:
        parallel.set_threads(2)
        kernel.fn = chunk
        two = np.empty(shape, np.float32)
        kernel([a, b], [two], {})
        assert len(seen) == 2, "the chunks should have run on two threads"
        parallel.set_threads(1)
        kernel.fn = real
        one = np.empty(shape, np.float32)
        kernel([a, b], [one], {})
    finally:
        parallel.set_threads(before)
        kernel.fn = real
    assert np.array_equal(two, one) and np.array_equal(one, want)
