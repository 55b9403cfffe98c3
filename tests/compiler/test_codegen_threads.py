"""A large generated kernel runs in chunks: on the C pool's threads (``codegen/pool.py``, one
ctypes call, no GIL hand-off per chunk) or, without the pool library, on ``ops/parallel``'s
Python helpers; either way it gives the bits of one chunk and of the NumPy kernel."""
from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from actorflow.compiler import codegen
from actorflow.compiler.codegen import pool, rows
from actorflow.compiler.codegen.kernels import PARALLEL_WORK, work_per_element
from actorflow.framework import dtype as dt
from actorflow.ops import parallel, registry

pytestmark = pytest.mark.timeout(300)

SHAPE = (256, 2 * PARALLEL_WORK // 512)  # twice the parallel threshold (2 steps: 2 units)
PROG = {"ops": ["mul", "scalar_add"], "op_attrs": [{}, {"scalar": 0.5, "reverse": False}],
        "args": [[0, 1], [2]], "shapes": [SHAPE, SHAPE], "dtypes": [dt.float32] * 2,
        "exports": [1], "parts": ["mul", "scalar_add"]}


def _kernel_and_inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(SHAPE).astype(np.float32)
    b = rng.standard_normal(SHAPE[1:]).astype(np.float32)  # broadcast over rows
    (kernel,) = codegen.kernels_for([(PROG, [(SHAPE, dt.float32), (b.shape, dt.float32)])])
    assert kernel is not None
    assert work_per_element(kernel.region) == 2 and kernel.parallel_min < a.size
    want = np.empty(SHAPE, np.float32)
    registry.get("fused_elementwise").kernel_cpu([a, b], [want], PROG)
    return kernel, a, b, want


@pytest.fixture
def two_threads():
    before = parallel.threads()
    parallel.set_threads(2)
    yield
    parallel.set_threads(before)


def test_chunks_run_on_pool_threads_and_agree_with_one_chunk(two_threads):
    if pool.runner() is None:
        pytest.skip("no C compiler: no pool library")
    kernel, a, b, want = _kernel_and_inputs()
    before = dict(pool.stats)
    two = np.empty(SHAPE, np.float32)
    for _ in range(200):  # until a pool thread has taken a chunk (it may be slow to wake)
        kernel([a, b], [two], {})
        assert np.array_equal(two, want)
        if pool.stats["pool_chunks"] > before["pool_chunks"]:
            break
    assert pool.stats["calls"] > before["calls"], "the chunks should have gone to the pool"
    assert pool.stats["pool_chunks"] > before["pool_chunks"], "no pool thread ran a chunk"
    parallel.set_threads(1)
    one = np.empty(SHAPE, np.float32)
    kernel([a, b], [one], {})
    assert np.array_equal(one, want)


def test_without_the_pool_library_chunks_run_on_python_helpers(two_threads, monkeypatch):
    monkeypatch.setitem(pool._state, "fn", None)  # as without a C compiler for the pool
    kernel, a, b, want = _kernel_and_inputs()
    real = kernel.fn
    seen: list = []
    both = threading.Barrier(2)

    def chunk(*args):
        me = threading.get_ident()
        if me not in seen:  # each thread's first chunk waits for the other thread's
            seen.append(me)
            both.wait(timeout=60)
        real(*args)

    try:
        kernel.fn = chunk
        two = np.empty(SHAPE, np.float32)
        kernel([a, b], [two], {})
    finally:
        kernel.fn = real
    assert len(seen) == 2, "the chunks should have run on two threads"
    assert np.array_equal(two, want)


def _gelu_kernel(shape):
    f32 = dt.float32
    return rows.row_kernels_for([("gelu", {"approximate": "none"}, [(shape, f32)],
                                  [(shape, f32)])])[0]


def test_concurrent_calls_share_the_pool_or_run_alone_and_agree(two_threads):
    """Two threads calling pooled kernels at once: one gets the pool, the other runs its
    chunks itself; every result is right and nothing waits for the other call."""
    shape = (512, 256)
    kern = _gelu_kernel(shape)
    if kern is None or pool.runner() is None:
        pytest.skip("no C compiler")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = np.empty(shape, np.float32)
    registry.get("gelu").kernel_cpu([x], [want], {"approximate": "none"})
    ref = np.empty(shape, np.float32)
    kern([x], [ref], {"approximate": "none"})
    np.testing.assert_allclose(ref, want, rtol=1e-6, atol=1e-7)
    bad: list = []

    def calls():
        out = np.empty(shape, np.float32)
        for _ in range(100):
            out.fill(np.nan)
            kern([x], [out], {"approximate": "none"})
            if not np.array_equal(out, ref):
                bad.append(1)

    ts = [threading.Thread(target=calls) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a pooled call hung"
    assert not bad, "a concurrent call gave other bits than a call alone"


def _child(q) -> None:
    kernel, a, b, want = _kernel_and_inputs()
    out = np.empty(SHAPE, np.float32)
    for _ in range(20):
        kernel([a, b], [out], {})
    q.put(bool(np.array_equal(out, want)))


def test_a_forked_child_makes_its_own_pool_threads(two_threads):
    if pool.runner() is None or "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no pool library, or no fork")
    kernel, a, b, _ = _kernel_and_inputs()
    out = np.empty(SHAPE, np.float32)
    kernel([a, b], [out], {})  # the parent's pool threads exist (or are starting)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(timeout=120)
    if p.is_alive():
        p.kill()
        pytest.fail("a pooled kernel hung in a forked child")
    assert p.exitcode == 0 and q.get(timeout=10) is True


def test_the_parallel_threshold_follows_the_work_per_element():
    from actorflow.compiler.codegen.kernels import PARALLEL_MIN
    from actorflow.compiler.codegen.region import program_of

    f32 = dt.float32

    def kernel(op, n):
        prog = program_of(op, {}, [((4, 4), f32)] * n, [((4, 4), f32)])
        return codegen.kernels_for([(prog, [((4, 4), f32)] * n)])[0]

    add, exp = kernel("add", 2), kernel("exp", 1)
    if add is None:
        pytest.skip("no C compiler")
    assert add.parallel_min == PARALLEL_WORK           # memory-bound: a million elements
    assert PARALLEL_MIN <= exp.parallel_min < add.parallel_min // 8  # a libm call per element
