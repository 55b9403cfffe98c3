"""Generated row kernels (``compiler/codegen/rows.py``, ops' ``c_row``) against the ops' NumPy
kernels, and an nn.Graph with layer norms and GELU training to the same losses with and
without them.

Tolerance: a row kernel sums a row in another order than NumPy's BLAS row sums (vectorised,
``#pragma omp simd``), so results may differ by a few ulps times the row length: we allow
``4 * eps * n`` relative to the largest magnitude of each output (``eps`` of the dtype, ``n``
the row length; for float16 / bfloat16 both sides compute in float32 and round once, so one
ulp of the storage dtype more). NaN and inf must sit at the same places."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.codegen import emit, rows
from actorflow.compiler.codegen.build import build
from actorflow.framework import dtype as dt
from actorflow.ops import registry

pytestmark = pytest.mark.timeout(300)

# the ops whose row form (c_row) this module checks against the NumPy kernel
ROW_OPS = ("layer_norm", "layer_norm_grad", "gelu", "gelu_grad", "gelu_with_grad", "softmax",
           "softmax_grad", "log_softmax", "log_softmax_grad", "sum", "mean")

DTYPES = {"float32": dt.float32, "float64": dt.float64, "float16": dt.float16}


def _ln_attrs(k, shape, w, b):
    return {"normalized_shape": tuple(shape[len(shape) - k:]), "normalized_ndim": k,
            "eps": 1e-5, "has_weight": w, "has_bias": b}


def _close(got, ref, n, name, floor: float = 0.0):
    """``got`` within the module's tolerance of ``ref``, relative to ``ref``'s largest finite
    magnitude (or ``floor`` where that is larger: results that cancel to rounding noise)."""
    assert got.shape == ref.shape and got.dtype == ref.dtype, name
    g, r = got.astype(np.float64), ref.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(r)), f"{name}: NaN at other places"
    fin = np.isfinite(r)
    assert np.array_equal(g[~fin & ~np.isnan(r)], r[~fin & ~np.isnan(r)]), f"{name}: inf"
    if not fin.any():
        return
    eps = np.finfo(ref.dtype).eps
    tol = 4 * np.finfo(np.float32 if ref.dtype.itemsize < 4 else ref.dtype).eps * max(n, 1) + eps
    scale = max(np.max(np.abs(r[fin])), floor, 1e-30)
    err = np.max(np.abs(g[fin] - r[fin])) / scale
    assert err <= tol, f"{name}: relative error {err:.3g} > {tol:.3g}"


def _run_both(op, attrs, ins, out_shapes, dtype):
    """(generated outputs, NumPy outputs, kernel) of one call."""
    d = DTYPES[dtype]
    kern = rows.row_kernels_for([(op, attrs, [(a.shape, d) for a in ins],
                                  [(s, d) for s in out_shapes])])[0]
    assert kern is not None, f"{op} should get a row kernel"
    got = [np.full(s, 7, d.np) for s in out_shapes]
    ref = [np.full(s, 7, d.np) for s in out_shapes]
    kern(ins, got, attrs)
    registry.get(op).kernel_cpu(ins, ref, attrs)
    return got, ref, kern


SHAPES = [((1, 8), 1), ((3, 5, 7), 1), ((4, 6, 5), 2), ((64, 96), 1), ((2, 300, 130), 1)]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape,k", SHAPES)
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_layer_norm_and_grad_rows_match_numpy(dtype, shape, k, affine):
    rng = np.random.default_rng(len(shape) * 7 + k)
    npd = DTYPES[dtype].np
    pshape = shape[len(shape) - k:]
    n = int(np.prod(pshape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(npd)
    w = rng.standard_normal(pshape).astype(npd)
    b = rng.standard_normal(pshape).astype(npd)
    attrs = _ln_attrs(k, shape, *affine)
    ins = [x] + [p for p, on in zip((w, b), affine) if on]
    stat = shape[:len(shape) - k] + (1,) * k
    got, ref, _ = _run_both("layer_norm", attrs, ins, [shape, stat, stat], dtype)
    for name, g, r in zip(("y", "mean", "invstd"), got, ref):
        _close(g, r, n, f"layer_norm {name}")
    dout = rng.standard_normal(shape).astype(npd)
    gattrs = {"normalized_ndim": k, "has_weight": affine[0]}
    gins = [dout, x, ref[1], ref[2]] + ([w] if affine[0] else [])
    got, ref, _ = _run_both("layer_norm_grad", gattrs, gins, [shape, pshape, pshape], dtype)
    rows_n = x.size // n
    for name, g, r, m in zip(("dx", "dweight", "dbias"), got, ref, (n, rows_n, rows_n)):
        _close(g, r, m, f"layer_norm_grad {name}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_non_contiguous_inputs_and_nan_inf_rows(dtype):
    rng = np.random.default_rng(3)
    npd = DTYPES[dtype].np
    base = rng.standard_normal((12, 2 * 40)).astype(npd)
    x = base[:, ::2]                    # rows not unit-stride: copied before the loop
    xt = rng.standard_normal((40, 12)).astype(npd).T  # a transposed view
    for arr in (x, xt):                 # both views write through to their bases
        arr[1, 3] = np.nan
        arr[2, 0] = np.inf
        arr[3, :] = -np.inf
        arr[4, :] = 5.0                 # a constant row: variance 0, output = bias
    for xin in (x, xt):
        assert not xin.flags.c_contiguous and np.isnan(xin[1, 3])
        attrs = _ln_attrs(1, xin.shape, True, True)
        w, b = np.ones(40, npd) * 1.5, np.arange(40, dtype=npd)
        got, ref, _ = _run_both("layer_norm", attrs, [xin, w, b],
                                [xin.shape, (12, 1), (12, 1)], dtype)
        for name, g, r in zip(("y", "mean", "invstd"), got, ref):
            _close(g, r, 40, f"layer_norm {name}")
        dout = rng.standard_normal((40, 12)).astype(npd).T
        got, ref, _ = _run_both("layer_norm_grad", {"normalized_ndim": 1, "has_weight": True},
                                [dout, xin, ref[1], ref[2], w], [xin.shape, (40,), (40,)],
                                dtype)
        for name, g, r in zip(("dx", "dweight", "dbias"), got, ref):
            _close(g, r, 40 * 12, f"layer_norm_grad {name}")


def test_a_second_call_on_the_same_arrays_reads_their_new_values():
    """A row kernel keeps what it worked out for a call's arrays (views, chunks, pointers:
    a graph calls it on the same registers every step); inputs it reads through copies (rows
    not unit-stride, a strided weight) and the per-chunk weight sums must still follow the
    arrays' current values."""
    from actorflow.ops import parallel
    rng = np.random.default_rng(5)
    before = parallel.threads()
    parallel.set_threads(2)
    try:
        base = np.empty((600, 2 * 64), np.float32)
        x = base[:, ::2]                         # copied before each call
        wbase = np.empty(2 * 64, np.float32)
        w = wbase[::2]                           # a strided param: copied too
        dout = np.empty((600, 64), np.float32)
        attrs = _ln_attrs(1, x.shape, True, False)
        gattrs = {"normalized_ndim": 1, "has_weight": True}
        d = dt.float32
        fwd, bwd = rows.row_kernels_for([
            ("layer_norm", attrs, [(x.shape, d), (w.shape, d)],
             [(x.shape, d), ((600, 1), d), ((600, 1), d)]),
            ("layer_norm_grad", gattrs, [(x.shape, d), (x.shape, d), ((600, 1), d),
                                         ((600, 1), d), (w.shape, d)],
             [(x.shape, d), ((64,), d), ((64,), d)])])
        outs = [np.empty(x.shape, np.float32), np.empty((600, 1), np.float32),
                np.empty((600, 1), np.float32)]
        gouts = [np.empty(x.shape, np.float32), np.empty(64, np.float32),
                 np.empty(64, np.float32)]
        for step in range(3):
            base[...] = rng.standard_normal(base.shape) * (step + 1)
            wbase[...] = rng.standard_normal(wbase.shape)
            dout[...] = rng.standard_normal(dout.shape)
            fwd([x, w], outs, attrs)
            ref = [np.empty_like(o) for o in outs]
            registry.get("layer_norm").kernel_cpu([x, w], ref, attrs)
            for g, r in zip(outs, ref):
                _close(g, r, 64, f"layer_norm, call {step}")
            gins = [dout, x, outs[1], outs[2], w]
            bwd(gins, gouts, gattrs)
            gref = [np.empty_like(o) for o in gouts]
            registry.get("layer_norm_grad").kernel_cpu(gins, gref, gattrs)
            for g, r in zip(gouts, gref):
                _close(g, r, 64 * 600, f"layer_norm_grad, call {step}")
        assert len(fwd.prepared.values()) == 1 and len(bwd.prepared.values()) == 1  # once
    finally:
        parallel.set_threads(before)


def test_new_views_of_the_same_memory_reuse_the_prepared_call(monkeypatch):
    """A graph makes its views anew each act, over the same registers: a call on new array
    objects with the memory and layout of an earlier call's reuses what that call worked out
    (and still reads the current values through its copies); other memory gets its own."""
    rng = np.random.default_rng(7)
    d = dt.float32
    base = np.empty((300, 2 * 64), np.float32)
    attrs = _ln_attrs(1, (300, 64), False, False)
    kern, = rows.row_kernels_for([("layer_norm", attrs, [((300, 64), d)],
                                   [((300, 64), d), ((300, 1), d), ((300, 1), d)])])
    prepared = []
    real = rows.RowKernel._prepare
    monkeypatch.setattr(rows.RowKernel, "_prepare",
                        lambda self, i, o: prepared.append(1) or real(self, i, o))
    outs = [np.empty((300, 64), np.float32), np.empty((300, 1), np.float32),
            np.empty((300, 1), np.float32)]
    for step in range(3):
        base[...] = rng.standard_normal(base.shape) * (step + 1)
        x = base[:, ::2]                                 # a new view object each call
        kern([x], [o[...] for o in outs], attrs)         # new output views too
        ref = [np.empty_like(o) for o in outs]
        registry.get("layer_norm").kernel_cpu([x], ref, attrs)
        for g, r in zip(outs, ref):
            _close(g, r, 64, f"layer_norm, call {step}")
    assert len(prepared) == 1
    other = base[:, 1::2]                                # other memory, the same layout
    kern([other], outs, attrs)
    assert len(prepared) == 2
    ref = [np.empty_like(o) for o in outs]
    registry.get("layer_norm").kernel_cpu([other], ref, attrs)
    for g, r in zip(outs, ref):
        _close(g, r, 64, "layer_norm on other memory")


def test_empty_rows_run_the_numpy_kernel():
    for shape in ((0, 8), (3, 0)):
        x = np.zeros(shape, np.float32)
        attrs = _ln_attrs(1, shape, False, False)
        got, ref, kern = _run_both("layer_norm", attrs, [x], [shape, (shape[0], 1),
                                                              (shape[0], 1)], "float32")
        for g, r in zip(got, ref):
            assert np.array_equal(g, r, equal_nan=True)
        assert kern.calls == 0


def test_a_kernel_built_for_one_row_length_runs_numpy_for_another():
    """A row kernel has its task's row length built in; a call whose rows are longer or
    shorter gets the NumPy kernel's result, and the C function is never called on it."""
    rng = np.random.default_rng(11)
    d = dt.float32
    attrs = _ln_attrs(1, (6, 8), False, False)
    kern, = rows.row_kernels_for([("layer_norm", attrs, [((6, 8), d)],
                                   [((6, 8), d), ((6, 1), d), ((6, 1), d)])])
    assert kern.task.n == 8 and "const int64_t n = 8;" in rows.emit_row_kernel("k", kern.task)
    for cols, calls in ((8, 1), (16, 1), (4, 1)):
        x = rng.standard_normal((6, cols)).astype(np.float32)
        got = [np.empty((6, cols), np.float32), np.empty((6, 1), np.float32),
               np.empty((6, 1), np.float32)]
        kern([x], got, attrs)
        ref = [np.empty_like(g) for g in got]
        registry.get("layer_norm").kernel_cpu([x], ref, attrs)
        for g, r in zip(got, ref):
            _close(g, r, cols, f"layer_norm over rows of {cols}")
        assert kern.calls == calls


def test_large_rows_split_over_threads_sum_like_one_thread():
    from actorflow.ops import parallel
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4096, 64)).astype(np.float64)
    dout = rng.standard_normal((4096, 64)).astype(np.float64)
    ln = registry.get("layer_norm").kernel_cpu
    stats = [np.empty((4096, 64)), np.empty((4096, 1)), np.empty((4096, 1))]
    ln([x], stats, _ln_attrs(1, x.shape, False, False))
    ins = [dout, x, stats[1], stats[2]]
    old = parallel.threads()
    try:
        parallel.set_threads(2)
        got2, ref, _ = _run_both("layer_norm_grad", {"normalized_ndim": 1, "has_weight": False},
                                 ins, [x.shape, (64,), (64,)], "float64")
        parallel.set_threads(1)
        got1, _, _ = _run_both("layer_norm_grad", {"normalized_ndim": 1, "has_weight": False},
                               ins, [x.shape, (64,), (64,)], "float64")
    finally:
        parallel.set_threads(old)
    for g2, g1, r in zip(got2, got1, ref):
        _close(g2, r, 4096, "two threads")
        _close(g1, r, 4096, "one thread")


def test_a_call_that_does_not_fit_the_row_form_gets_none():
    d = dt.float32
    # weight announced but missing; a dtype the generator does not take
    assert rows.row_task("layer_norm", _ln_attrs(1, (4, 8), True, False),
                         [((4, 8), d)], [((4, 8), d), ((4, 1), d), ((4, 1), d)]) is None
    assert rows.row_task("layer_norm", _ln_attrs(1, (4, 8), False, False),
                         [((4, 8), dt.int64)], [((4, 8), d), ((4, 1), d), ((4, 1), d)]) is None
    assert rows.row_task("relu", {}, [((4, 8), d)], [((4, 8), d)]) is None


def _train_ln(steps: int = 5):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32),
                          nn.LayerNorm(32), nn.Linear(32, 4))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((8, 8, 16)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 64))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            loss = F.cross_entropy(self.model(a).reshape(-1, 4), b)
            loss.backward()
            return loss

    g = Train()
    return g, [float(g(x, y).numpy()) for _ in range(steps)]


def test_graph_trains_to_the_same_losses_with_row_kernels(monkeypatch):
    """float32 losses within 1e-5 relative: the row sums' order differs (see the module
    docstring), a few ulps per step, over 5 steps."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train_ln()
    row_tasks = [v for v in g.plan.codegen["tasks"].values() if v.get("rows")]
    assert {t["ops"][0] for t in row_tasks} >= {"layer_norm", "layer_norm_grad", "gelu",
                                                "gelu_with_grad"}
    ran = [k for k in codegen.kernels_of(g.plan).values() if isinstance(k, rows.RowKernel)]
    assert ran and all(k.calls == 5 for k in ran), "the actors should call the row kernels"
    monkeypatch.setenv(codegen.ENV, "0")
    _, off = _train_ln()
    np.testing.assert_allclose(on, off, rtol=1e-5)


ULPS = 4  # elementwise: libm's erf / tanh / exp and NumPy's or SciPy's differ by a few ulps
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 9.0, -9.0, 30.0, -30.0, 88.0, -88.0,
           200.0, -200.0]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("approximate,save", [("none", True), ("none", False), ("tanh", False)])
@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (2, 3, 700)])
def test_gelu_and_grad_rows_match_numpy(dtype, approximate, save, shape):
    rng = np.random.default_rng(shape[-1])
    npd = DTYPES[dtype].np
    x = (rng.standard_normal(shape) * 3).astype(npd)
    flat = x.reshape(-1)
    flat[:len(SPECIAL)] = np.array(SPECIAL[:flat.size], np.float64).astype(npd)
    attrs = {"approximate": approximate, "save_cdf": save}
    outs = [shape, shape] if save else [shape]
    got, ref, _ = _run_both("gelu", attrs, [x], outs, dtype)
    for name, g, r in zip(("y", "cdf"), got, ref):
        _close(g, r, ULPS, f"gelu {name}")
    dout = rng.standard_normal(shape).astype(npd)
    gins = [dout, x] + ([ref[1]] if save else [])
    got, ref, _ = _run_both("gelu_grad", {"approximate": approximate}, gins, [shape], dtype)
    _close(got[0], ref[0], ULPS, "gelu_grad")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (2, 3, 700)])
def test_gelu_with_grad_row_matches_numpy_and_the_separate_row_kernels(dtype, approximate, shape):
    """gelu_with_grad (the compiler's recomputed gelu and its gradient in one call): within
    ULPS of its NumPy kernel, and the very bits of gelu's and gelu_grad's own row kernels."""
    rng = np.random.default_rng(shape[-1] + 1)
    npd = DTYPES[dtype].np
    x = (rng.standard_normal(shape) * 3).astype(npd)
    flat = x.reshape(-1)
    flat[:len(SPECIAL)] = np.array(SPECIAL[:flat.size], np.float64).astype(npd)
    dout = rng.standard_normal(shape).astype(npd)
    dout.reshape(-1)[-1:] = np.inf
    attrs = {"approximate": approximate}
    got, ref, _ = _run_both("gelu_with_grad", attrs, [dout, x], [shape, shape], dtype)
    for name, g, r in zip(("y", "dx"), got, ref):
        _close(g, r, ULPS, f"gelu_with_grad {name}")
    y, _, _ = _run_both("gelu", {**attrs, "save_cdf": False}, [x], [shape], dtype)
    dx, _, _ = _run_both("gelu_grad", attrs, [dout, x], [shape], dtype)
    np.testing.assert_array_equal(got[0], y[0])
    np.testing.assert_array_equal(got[1], dx[0])


def test_generated_exp_is_within_an_ulp_and_keeps_nan_inf():
    """af_exp (rows.py) on float32: within 1 ulp of the correctly rounded exp over its whole
    range, subnormal and overflowing results included; NaN, inf, -inf as np.exp."""
    x = np.concatenate([np.linspace(-106, 90, 400_001, dtype=np.float32),
                        np.array([np.nan, np.inf, -np.inf, 0, -0.0, 88.72, 88.73], np.float32)])
    src = emit.PRELUDE + rows.ROW_PRELUDE + (
        "__attribute__((optimize(\"tree-vectorize\"))) void af_test_exp(const float *x, "
        "float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = af_exp(x[i]); }\n")
    lib = build(src)
    assert lib is not None
    y = np.empty_like(x)
    lib.af_test_exp(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                    ctypes.c_int64(x.size))
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype(np.float64))
        ref32 = ref.astype(np.float32)
    fin = np.isfinite(ref32) & (ref32 != 0)
    ulps = np.abs(y[fin] - ref[fin]) / np.spacing(ref32[fin]).astype(np.float64)
    assert ulps.max() <= 1.0
    assert np.array_equal(y[~fin], ref32[~fin], equal_nan=True)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(1, 1), (4, 9), (3, 5, 130)])
@pytest.mark.parametrize("op,attrs", [("softmax", {"dim": -1}),
                                      ("softmax", {"dim": -1, "safe": True}),
                                      ("log_softmax", {"dim": -1})])
def test_softmax_family_rows_match_numpy(dtype, shape, op, attrs):
    rng = np.random.default_rng(shape[-1] + len(attrs))
    npd = DTYPES[dtype].np
    x = (rng.standard_normal(shape) * 4).astype(npd)
    if x.size > 20:
        r = x.reshape(-1, shape[-1])
        r[1, :] = -np.inf           # a fully masked row (safe: zeros; else NaN)
        r[2, 0] = np.nan
        r[3, 1] = np.inf
        r[0, 2] = -np.inf
    n = shape[-1]
    got, ref, _ = _run_both(op, attrs, [x], [shape], dtype)
    _close(got[0], ref[0], n + ULPS, op)
    dout = rng.standard_normal(shape).astype(npd)
    gop = op + "_grad"
    got, ref, _ = _run_both(gop, {"dim": -1}, [dout, ref[0]], [shape], dtype)
    _close(got[0], ref[0], n + ULPS, gop)


def test_softmax_on_another_dim_has_no_row_form():
    d = dt.float32
    assert rows.row_task("softmax", {"dim": 0}, [((4, 8), d)], [((4, 8), d)]) is None


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(1, 8), (3, 5, 7), (64, 96), (2, 300, 130), (4, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_last_axis_rows_match_numpy(op, dtype, shape, keepdim):
    rng = np.random.default_rng(len(shape) + shape[-1])
    npd = DTYPES[dtype].np
    x = (rng.standard_normal(shape) * 3 + 1).astype(npd)
    if x.size > 4:
        x.flat[1], x.flat[3] = np.nan, np.inf
    attrs = {"dim": [-1], "keepdim": keepdim}
    out = shape[:-1] + ((1,) if keepdim else ())
    got, ref, _ = _run_both(op, attrs, [x], [out], dtype)
    _close(got[0], ref[0], shape[-1], f"{op} {shape}")
    # a strided view (every other row) reads through the row strides
    if len(shape) == 2 and shape[0] > 1:
        v = x[::2]
        vout = v.shape[:-1] + ((1,) if keepdim else ())
        got, ref, _ = _run_both(op, attrs, [v], [vout], dtype)
        _close(got[0], ref[0], shape[-1], f"{op} view {shape}")


def test_sum_rows_only_for_the_last_axis():
    d = dt.float32
    assert rows.row_task("sum", {"dim": [0], "keepdim": False}, [((3, 4), d)], [((4,), d)]) is None
    assert rows.row_task("sum", {"dim": [-1], "keepdim": False, "dtype": dt.float64},
                         [((3, 4), d)], [((3,), dt.float64)]) is None
    assert rows.row_task("mean", {"dim": -1}, [((3, 4), d)], [((3,), d)]) is not None
