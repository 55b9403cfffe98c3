"""Row forms of the reductions over the last axis (amax / amin, max / min with indices,
logsumexp; ``c_row`` in ops/reduce_extrema.py and ops/reduce.py) against their NumPy kernels:
random rows with NaN, inf and ties, keepdim or not, float32 / float64 / float16 / bfloat16,
contiguous, strided and transposed inputs.

Tolerance: the extrema are comparisons only, so values and indices must be identical (of two
equal zeros +0 and -0 either may come out, as NumPy's own loops differ there: zeros are
compared by value); logsumexp sums its exponentials in another order and, in float16 /
bfloat16, without rounding each exponential to the storage dtype: ``_close`` of
test_codegen_rows (``4 * eps * n`` relative, one ulp of the storage dtype more)."""
from __future__ import annotations

import numpy as np
import pytest

from actorflow.compiler.codegen import rows
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from tests.compiler.test_codegen_rows import _close

pytestmark = pytest.mark.timeout(300)

ROW_OPS = ("amax", "amin", "max_dim", "min_dim", "logsumexp")  # the row forms checked here

DTYPES = {"float32": dt.float32, "float64": dt.float64, "float16": dt.float16,
          "bfloat16": dt.bfloat16}
SHAPES = [(1, 1), (7,), (4, 9), (3, 5, 130), (64, 96)]
EXTREMA = ["amax", "amin", "max_dim", "min_dim"]


def _rows_of(rng, shape, d):
    """Random values with, where there is room, a NaN row entry, a tie, +inf and -inf rows."""
    x = rng.standard_normal(shape) * 4
    r = x.reshape(-1, shape[-1])
    if r.shape[0] >= 4 and r.shape[1] >= 3:
        r[0, 1] = np.nan
        r[0, 2] = np.nan              # the first NaN is the arg-extremum
        r[1, :] = -np.inf
        r[2, 0] = np.inf
        r[2, 2] = -np.inf
        r[3, 0] = r[3, 2] = 50.0      # ties: the first one wins
        r[3, 1] = r[3, 2] = -50.0
    return x.astype(d.np)


def _call(op, attrs, ins, outs):
    """(generated outputs, NumPy outputs); the generated kernel must have run."""
    kern, = rows.row_kernels_for([(op, attrs, [(a.shape, DTYPES[a.dtype.name]) for a in ins],
                                   outs)])
    assert kern is not None, f"{op}{attrs}: no row kernel"
    got = [np.full(s, 7, d.np) for s, d in outs]
    ref = [np.full(s, 7, d.np) for s, d in outs]
    kern(ins, got, attrs)
    registry.get(op).kernel_cpu(ins, ref, attrs)
    assert kern.calls == 1, f"{op}: fell back to NumPy"
    return got, ref


def _extremum_call(op, x, keepdim, d):
    out = x.shape[:-1] + ((1,) if keepdim else ())
    if op in ("amax", "amin"):
        return _call(op, {"dim": (-1,), "keepdim": keepdim}, [x], [(out, d)])
    return _call(op, {"dim": -1, "keepdim": keepdim}, [x], [(out, d), (out, dt.int64)])


def _same(got, ref, what):
    g, r = got.astype(np.float64), ref.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(r), err_msg=what)
    np.testing.assert_array_equal(g[~np.isnan(r)], r[~np.isnan(r)], err_msg=what)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", EXTREMA)
def test_extrema_rows_give_the_numpy_kernels_values(op, dtype, shape, keepdim):
    d = DTYPES[dtype]
    x = _rows_of(np.random.default_rng(shape[-1] + len(op)), shape, d)
    got, ref = _extremum_call(op, x, keepdim, d)
    for j, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape and g.dtype == r.dtype
        _same(g, r, f"{op} output {j} {shape} {dtype}")


@pytest.mark.parametrize("op", EXTREMA + ["logsumexp"])
def test_strided_and_transposed_rows(op):
    rng = np.random.default_rng(11)
    base = _rows_of(rng, (12, 80), dt.float32)
    for x in (base[:, ::2], base[::3], np.ascontiguousarray(base[:, :30]).T):
        assert not x.flags.c_contiguous
        if op == "logsumexp":
            got, ref = _call(op, {"dim": (-1,), "keepdim": False}, [x],
                             [(x.shape[:-1], dt.float32)])
            _close(got[0], ref[0], x.shape[-1] + 4, f"{op} {x.strides}")
            continue
        got, ref = _extremum_call(op, x, False, dt.float32)
        for g, r in zip(got, ref):
            _same(g, r, f"{op} {x.strides}")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_rows_match_numpy(dtype, shape, keepdim):
    d = DTYPES[dtype]
    x = _rows_of(np.random.default_rng(shape[-1]), shape, d)
    if x.size > 40:
        x.reshape(-1, shape[-1])[5, :] = np.inf       # all +inf: inf
        x.reshape(-1, shape[-1])[6, 3] = 80.0         # large: shifted by the row max
    out = x.shape[:-1] + ((1,) if keepdim else ())
    got, ref = _call("logsumexp", {"dim": (-1,), "keepdim": keepdim}, [x], [(out, d)])
    _close(got[0], ref[0], shape[-1] + 4, f"logsumexp {shape} {dtype}")


def test_reductions_over_other_dims_have_no_row_form():
    d = dt.float32
    for op in ("amax", "amin", "logsumexp"):
        assert rows.row_task(op, {"dim": (0,), "keepdim": False}, [((3, 4), d)],
                             [((4,), d)]) is None
        assert rows.row_task(op, {"dim": None, "keepdim": False}, [((3, 4), d)],
                             [((), d)]) is None
        assert rows.row_task(op, {"dim": (-1,), "keepdim": False}, [((3, 4), d)],
                             [((3,), d)]) is not None
    for op in ("max_dim", "min_dim"):
        assert rows.row_task(op, {"dim": 0, "keepdim": False}, [((3, 4), d)],
                             [((4,), d), ((4,), dt.int64)]) is None
        # integer inputs run the NumPy kernel
        assert rows.row_task(op, {"dim": -1, "keepdim": False}, [((3, 4), dt.int64)],
                             [((3,), dt.int64), ((3,), dt.int64)]) is None
        # the indices must be an integer array
        assert rows.row_task(op, {"dim": -1, "keepdim": False}, [((3, 4), d)],
                             [((3,), d), ((3,), d)]) is None


@pytest.mark.parametrize("op", ["max_dim", "min_dim"])
def test_max_min_with_indices_store_the_element_they_point_at(op):
    """Of equal zeros the first one is the extremum: its index and its sign, as NumPy."""
    x = np.array([[-0.0, 0.0, -1.0, -2.0], [0.0, -0.0, -3.0, -1.0], [1.0, 2.0, -0.0, 0.0],
                  [1.0, np.nan, 3.0, np.nan]], np.float32)
    if op == "min_dim":
        x = np.where(np.isnan(x), x, -x).astype(np.float32)
    (vals, idx), (rvals, ridx) = _extremum_call(op, x, False, dt.float32)
    assert np.array_equal(idx, ridx)
    assert np.array_equal(np.signbit(vals), np.signbit(rvals))
    _same(vals, rvals, op)
