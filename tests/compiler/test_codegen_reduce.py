"""Generated reductions (compiler/codegen/reduce.py): grad_norm's generated pass over several
gradients against its NumPy kernel, on random shapes (empty ones and ones spanning the
threads' chunks included), float32 / float64 / float16 / bfloat16, norm types 2, 1, inf, -inf,
with NaN and inf; the calls that keep the NumPy kernel; and a clipping multi_tensor_update's
generated loop against clip_grad_by_norm then the update op, bit for bit."""
from __future__ import annotations

import math

import numpy as np
import pytest

from actorflow.compiler.codegen import reduce, update
from actorflow.framework import dtype as dt
from actorflow.ops import parallel, registry

pytestmark = pytest.mark.timeout(300)

NORMS = [2.0, 1.0, math.inf, -math.inf]
DTYPES = [dt.float32, dt.float64, dt.float16, dt.bfloat16]
# relative tolerance per dtype: the generated sums are blocked and chunked where np.dot /
# np.sum order theirs otherwise (the same accumulation types: float for float32 and the
# halves, double for float64 and for p = 1); the halves' result is rounded to the half type
RTOL = {"float32": 2e-6, "float64": 1e-13, "float16": 1e-3, "bfloat16": 8e-3}
_GRAD_NORM = registry.get("grad_norm")


def _shapes(rng, big: bool) -> list:
    shapes = [tuple(int(d) for d in rng.integers(1, 40, size=rng.integers(1, 4)))
              for _ in range(rng.integers(1, 5))]
    shapes.insert(int(rng.integers(0, len(shapes) + 1)), (0,))  # an empty gradient
    if big:  # larger than PARALLEL_MIN: chunks on the intra-op threads, across tensors
        shapes += [(reduce.PARALLEL_MIN // 3 + 11,), (reduce.PARALLEL_MIN + 5, 3)]
    return shapes


def _arrays(rng, shapes, d, special: str) -> list:
    out = [(rng.standard_normal(s) * 3).astype(d.np) for s in shapes]
    nonempty = [a for a in out if a.size]
    if special:
        a = nonempty[int(rng.integers(0, len(nonempty)))]
        a.reshape(-1)[int(rng.integers(0, a.size))] = {"nan": np.nan, "inf": -np.inf}[special]
    return out


def _check(kern, arrays, d, p) -> None:
    ours, ref = np.zeros((), d.np), np.zeros((), d.np)
    with np.errstate(all="ignore"):
        kern(arrays, [ours], {"norm_type": p})
        _GRAD_NORM.kernel_cpu(arrays, [ref], {"norm_type": p})
    a, b = float(ours), float(ref)
    if math.isnan(b) or math.isinf(b) or p in (math.inf, -math.inf):
        assert a == b or (math.isnan(a) and math.isnan(b)), (a, b)
    else:
        assert a == pytest.approx(b, rel=RTOL[d.name], abs=0), (a, b)


@pytest.fixture(scope="module")
def kernels():
    """A kernel per (dtype, norm type, case), built as one library."""
    keys, items, cases = [], [], {}
    for di, d in enumerate(DTYPES):
        for p in NORMS:
            for case in range(6):
                rng = np.random.default_rng(100 * di + case)
                shapes = _shapes(rng, big=case >= 4)
                special = ("", "nan", "inf")[case % 3]
                cases[(d.name, p, case)] = (shapes, special, 100 * di + case)
                keys.append((d.name, p, case))
                items.append(("grad_norm", {"norm_type": p}, [(s, d) for s in shapes],
                              [((), d)]))
    return dict(zip(keys, reduce.reduce_kernels_for(items))), cases


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("p", NORMS, ids=str)
@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_generated_grad_norm_equals_numpy_kernel(kernels, d, p, threads):
    built, cases = kernels
    old = parallel.threads()
    parallel.set_threads(threads)
    try:
        for case in range(6):
            shapes, special, seed = cases[(d.name, p, case)]
            kern = built[(d.name, p, case)]
            assert kern is not None
            arrays = _arrays(np.random.default_rng(seed), shapes, d, special)
            _check(kern, arrays, d, p)
            if case >= 4 and threads > 1:
                assert len(kern.prepared.get(arrays).chunks) > 1  # the call was split into chunks
    finally:
        parallel.set_threads(old)


def test_nan_and_inf_are_the_numpy_kernels():
    d = dt.float32
    for p in NORMS:
        (kern,) = reduce.reduce_kernels_for(
            [("grad_norm", {"norm_type": p}, [((5,), d), ((3,), d)], [((), d)])])
        for x0, x1, want in (([1, 2, np.nan, 0, 1], [1, 1, 1], math.nan),
                             ([1, 2, 3, 0, 1], [1, np.nan, 1], math.nan),
                             ([1, -np.inf, 3, 0, 1], [1, 1, 1], math.inf if p > 0 else None)):
            arrays = [np.array(x0, np.float32), np.array(x1, np.float32)]
            out = np.zeros((), np.float32)
            kern(arrays, [out], {"norm_type": p})
            ref = np.zeros((), np.float32)
            _GRAD_NORM.kernel_cpu(arrays, [ref], {"norm_type": p})
            if want is not None:
                assert (math.isnan(float(out)) if math.isnan(want) else float(out) == want)
            assert np.array_equal(out, ref, equal_nan=True)


def test_what_keeps_the_numpy_kernel():
    f32 = dt.float32
    # norm types without a form, mixed dtypes, a non-0-d output: no generated reduction
    assert reduce.task_of("grad_norm", {"norm_type": 3.0}, [((4,), f32)], [((), f32)]) is None
    assert reduce.task_of("grad_norm", {"norm_type": 0.0}, [((4,), f32)], [((), f32)]) is None
    assert reduce.task_of("grad_norm", {"norm_type": 2.0},
                          [((4,), f32), ((4,), dt.float64)], [((), dt.float64)]) is None
    assert reduce.task_of("sum", {"dim": None}, [((4,), f32)], [((), f32)]) is None
    # a strided input at call time runs the NumPy kernel
    (kern,) = reduce.reduce_kernels_for(
        [("grad_norm", {"norm_type": 2.0}, [((4, 6), f32)], [((), f32)])])
    base = np.arange(48, dtype=np.float32).reshape(8, 6)
    out, ref = np.zeros((), np.float32), np.zeros((), np.float32)
    kern([base[::2]], [out], {"norm_type": 2.0})
    _GRAD_NORM.kernel_cpu([base[::2]], [ref], {"norm_type": 2.0})
    assert kern.calls == 0 and out == ref
    # all inputs empty: 0, as the NumPy kernel
    (kern,) = reduce.reduce_kernels_for(
        [("grad_norm", {"norm_type": 2.0}, [((0,), f32), ((0, 3), f32)], [((), f32)])])
    out[...] = 7
    kern([np.zeros(0, np.float32), np.zeros((0, 3), np.float32)], [out], {"norm_type": 2.0})
    assert float(out) == 0.0


def test_every_op_with_a_reduce_form_is_checked_here():
    assert {n for n, op in registry.all_ops().items() if op.c_reduce is not None} == \
        {"grad_norm"}


# ---- a clipping multi_tensor_update (fuse_clip_grad's product) ---------------------------------

_SCALE = {"grad_scale": "clip_grad_by_norm", "grad_scale_inputs": 1}


def _clip_case(dtype, seed, shapes):
    rng = np.random.default_rng(seed)
    ins = [np.array(0.05)]
    for s in shapes:
        p, g = rng.standard_normal(s).astype(dtype), rng.standard_normal(s).astype(dtype)
        ins += [p, g, np.abs(rng.standard_normal(s)).astype(dtype)]
    return ins


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm", [0.3, 50.0, 7.0e-7, math.nan, math.inf])
def test_clipping_update_equals_clip_then_update(dtype, norm):
    attrs = {"momentum": 0.9, "weight_decay": 0.01}
    shapes = [(3, 5), (update.PARALLEL_MIN + 9,), (0,), (4,)]
    members = [0, 1, 3]  # member 2 (empty) is not clipped; nor would one the graph observes
    mattrs = {"update": "momentum_update", "update_attrs": attrs, "arity": 3, **_SCALE,
              "grad_scale_attrs": {"max_norm": 0.5}, "grad_scale_params": members}
    d = {np.float32: dt.float32, np.float64: dt.float64}[dtype]
    ours = _clip_case(dtype, 5, shapes) + [np.array(norm, dtype)]
    metas = [(tuple(a.shape), d if a.dtype == dtype else dt.float64) for a in ours]
    (kern,) = update.kernels_for([("multi_tensor_update", mattrs, metas)])
    assert kern is not None and update.ops_of(kern.task) == ["clip_grad_by_norm",
                                                             "momentum_update"]
    ref = _clip_case(dtype, 5, shapes)
    clip = registry.get("clip_grad_by_norm").kernel_cpu
    step = registry.get("momentum_update").kernel_cpu
    grads_before = [a.copy() for a in ours[2::3][:len(shapes)]]
    with np.errstate(all="ignore"):
        kern(ours, [], mattrs)
        for m in members:
            clip([ref[1 + 3 * m + 1], np.array(norm, dtype)], [], {"max_norm": 0.5})
        for m in range(len(shapes)):
            i = 1 + 3 * m
            step([ref[i], ref[i + 1], ref[0], ref[i + 2]], [], attrs)
    assert kern.calls == 1
    for m in range(len(shapes)):  # params and momentum buffers: the same bits
        i = 1 + 3 * m
        for a, b in ((ours[i], ref[i]), (ours[i + 2], ref[i + 2])):
            assert np.array_equal(a, b, equal_nan=True)
    # the generated loop scales g as it loads it: the gradient buffers are not written
    for a, b in zip(ours[2::3][:len(shapes)], grads_before):
        assert np.array_equal(a, b)
    # the NumPy kernel of the same op gives the same parameters
    again = _clip_case(dtype, 5, shapes) + [np.array(norm, dtype)]
    with np.errstate(all="ignore"):
        registry.get("multi_tensor_update").kernel_cpu(again, [], mattrs)
    for m in range(len(shapes)):
        i = 1 + 3 * m
        assert np.array_equal(again[i], ref[i], equal_nan=True)


def test_a_call_on_new_views_of_the_same_memory_reuses_its_preparation():
    f32 = dt.float32
    (kern,) = reduce.reduce_kernels_for(
        [("grad_norm", {"norm_type": 1.0}, [((6,), f32), ((2, 3), f32)], [((), f32)])])
    a, b = np.arange(6, dtype=np.float32), -np.ones((2, 3), np.float32)
    out = np.zeros((), np.float32)
    kern([a, b], [out], {"norm_type": 1.0})
    first, = kern.prepared.values()
    new = [a.view(), b.reshape(2, 3)]  # a graph's new views
    kern(new, [out], {"norm_type": 1.0})
    assert kern.prepared.get(new) is first and float(out) == 21.0
    c = a.copy() * 2  # other memory: prepared anew
    kern([c, b], [out], {"norm_type": 1.0})
    assert kern.prepared.get([c, b]) is not first and float(out) == 36.0
