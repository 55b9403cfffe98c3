"""Sorting and selection (``ops/sort.py``): sort, argsort, topk, kthvalue, median, nanmedian,
mode, searchsorted, unique, bincount, roc_auc_score, nansum and nanmean - forward vs PyTorch /
NumPy, gradients vs finite differences (float64), tie rules, graphs and errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
rng = np.random.default_rng(0)


def t(a):
    return flow.tensor(a)


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.detach().numpy()))


# ---- sort / argsort / topk ----------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["float", "int_ties", "bool", "nan"])
def test_sort_matches_torch_including_ties(dim, descending, kind):
    if kind == "float":
        a = rng.standard_normal((3, 5, 4))
    elif kind == "int_ties":
        a = rng.integers(-2, 3, (3, 5, 4)).astype(np.int32)
    elif kind == "bool":
        a = rng.random((3, 5, 4)) > 0.5
    else:
        a = rng.standard_normal((3, 5, 4))
        a[rng.random(a.shape) > 0.7] = np.nan
    v, i = flow.sort(t(a), dim, descending)
    tv, ti = torch.sort(torch.tensor(a), dim=dim, descending=descending, stable=True)
    same(v, tv)
    same(i, ti)
    same(flow.argsort(t(a), dim, descending), ti)
    r = t(a).sort(dim=dim, descending=descending)
    same(r.values, tv)
    same(r.indices, ti)


def test_sort_0d_and_msort():
    v, i = flow.sort(t(np.float32(3.0)))
    assert v.shape == () and float(v) == 3.0 and int(i) == 0
    a = rng.standard_normal((4, 3))
    np.testing.assert_array_equal(flow.msort(t(a)).numpy(), np.sort(a, axis=0))


@pytest.mark.parametrize("dim", [0, -1])
def test_sort_gradient(dim):
    gradcheck(lambda x: flow.sort(x, dim, True).values, rng.standard_normal((3, 4)))


@needs_torch
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [0, 1])
def test_topk_matches_torch(largest, dim):
    a = rng.standard_normal((6, 7))
    v, i = flow.topk(t(a), 3, dim, largest)
    tv, ti = torch.topk(torch.tensor(a), 3, dim, largest)
    same(v, tv)
    same(i, ti)
    gradcheck(lambda x: flow.topk(x, 3, dim, largest).values, a)


def test_topk_errors():
    with pytest.raises(OpError, match="topk: k \\(5\\) is out of range"):
        flow.topk(t(np.zeros((2, 4))), 5)


# ---- kthvalue / median / mode ------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_median_mode_match_torch(keepdim):
    a = rng.standard_normal((4, 6, 5))
    ta = torch.tensor(a)
    for dim in (0, 1, -1):
        for ours, ref in [(flow.kthvalue(t(a), 2, dim, keepdim), ta.kthvalue(2, dim, keepdim)),
                          (flow.median(t(a), dim, keepdim), ta.median(dim, keepdim)),
                          (flow.nanmedian(t(a), dim, keepdim), ta.nanmedian(dim, keepdim))]:
            same(ours.values, ref.values)
            same(ours.indices, ref.indices)
    ints = rng.integers(0, 4, (5, 9)).astype(np.float64)  # many equally frequent values
    for dim in (0, 1):
        m, tm = flow.mode(t(ints), dim, keepdim), torch.tensor(ints).mode(dim, keepdim)
        same(m.values, tm.values)
        same(m.indices, tm.indices)
    same(flow.median(t(a)), ta.median())


@needs_torch
def test_median_nan_rules_match_torch():
    a = np.array([[1.0, np.nan, 2.0, np.nan], [3.0, 1.0, 2.0, 0.5], [np.nan] * 4])
    ta = torch.tensor(a)
    for ours, ref in [(flow.median(t(a), 1), ta.median(1)),
                      (flow.nanmedian(t(a), 1), ta.nanmedian(1))]:
        np.testing.assert_array_equal(ours.values.numpy(), ref.values.numpy())
        # PyTorch's index for an all-NaN row of nanmedian is whatever nth_element leaves there
        same(ours.indices[:2], ref.indices[:2])
    assert np.isnan(flow.median(t(a)).item())
    assert flow.nanmedian(t(a)).item() == ta.nanmedian().item()


def test_median_of_empty_and_zero_size_rows():
    assert np.isnan(flow.median(t(np.zeros((2, 0, 3)))).item())
    v, i = flow.median(t(np.zeros((2, 0, 3))), 0)
    assert v.shape == (0, 3) and i.shape == (0, 3)
    with pytest.raises(OpError, match="median_dim: cannot select along dim 1 of size 0"):
        flow.median(t(np.zeros((2, 0, 3))), 1)


@pytest.mark.parametrize("fn", [
    lambda x: flow.median(x, 1).values, lambda x: flow.median(x, 0, True).values,
    lambda x: flow.median(x), lambda x: flow.kthvalue(x, 3, 1).values,
    lambda x: flow.nanmedian(x, -1).values,
])
def test_selection_gradients(fn):
    gradcheck(fn, rng.standard_normal((4, 5)))


def test_mode_gradient_goes_to_returned_index():
    x = flow.tensor([[1.0, 2.0, 2.0, 1.0, 3.0]], requires_grad=True)
    v, i = flow.mode(x, 1)
    v.sum().backward()
    assert int(i) == 3
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0, 1, 0]])


def test_median_gradient_shared_among_ties():
    x = flow.tensor([1.0, 2.0, 2.0, 5.0], requires_grad=True)
    flow.median(x).backward()  # the lower median, 2, appears twice
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0.5, 0.5, 0])


# ---- searchsorted ------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_matches_torch(right):
    seq = np.sort(rng.integers(0, 10, (3, 6)), axis=1).astype(np.float64)
    vals = rng.integers(-1, 11, (3, 4)).astype(np.float64)
    same(flow.searchsorted(t(seq), t(vals), right=right),
         torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right))
    same(flow.searchsorted(t(seq[0]), t(vals), right=right),
         torch.searchsorted(torch.tensor(seq[0]), torch.tensor(vals), right=right))
    unsorted = rng.standard_normal((2, 5))  # PyTorch's bisection, step by step
    v2 = rng.standard_normal((2, 7))
    same(flow.searchsorted(t(unsorted), t(v2), right=right),
         torch.searchsorted(torch.tensor(unsorted), torch.tensor(v2), right=right))
    perm = np.argsort(unsorted, axis=1)
    same(flow.searchsorted(t(unsorted), t(v2), right=right, sorter=t(perm)),
         torch.searchsorted(torch.tensor(unsorted), torch.tensor(v2), right=right,
                            sorter=torch.tensor(perm)))


def test_searchsorted_scalar_int32_and_errors():
    seq = t(np.array([1, 3, 5, 7, 9]))
    out = flow.searchsorted(seq, 5, out_int32=True)
    assert out.dtype is flow.int32 and out.shape == () and int(out) == 2
    assert int(flow.searchsorted(seq, 5, side="right")) == 3
    with pytest.raises(OpError, match="searchsorted: sorted_sequence and values"):
        flow.searchsorted(t(np.zeros((2, 3))), t(np.zeros((3, 3))))


# ---- unique / bincount / roc_auc_score ---------------------------------------------------------

@needs_torch
def test_unique_matches_torch():
    a = rng.integers(0, 6, (3, 4, 5))
    v, inv, cnt = flow.unique(t(a), return_inverse=True, return_counts=True)
    tv, tinv, tcnt = torch.unique(torch.tensor(a), return_inverse=True, return_counts=True)
    same(v, tv)
    np.testing.assert_array_equal(inv.numpy(), tinv.numpy())
    np.testing.assert_array_equal(cnt.numpy(), tcnt.numpy())
    assert inv.dtype is flow.int32  # OneFlow's default index dtype
    same(flow.unique(t(a)), tv)


def test_unique_unsorted_keeps_first_occurrence_order():
    v, inv, cnt = flow.unique(t(np.array([3, 1, 2, 0, 2])), sorted=False, return_inverse=True,
                              return_counts=True, dtype=flow.int64)
    np.testing.assert_array_equal(v.numpy(), [3, 1, 2, 0])
    np.testing.assert_array_equal(inv.numpy(), [0, 1, 2, 3, 2])
    np.testing.assert_array_equal(cnt.numpy(), [1, 1, 2, 1])
    assert inv.dtype is flow.int64


@needs_torch
def test_bincount_matches_torch():
    x = rng.integers(0, 7, 20)
    w32 = rng.standard_normal(20).astype(np.float32)
    for args, kw in [((), {}), ((), {"minlength": 12}), ((w32,), {}), ((w32.astype(np.int64),),
                                                                       {"minlength": 3})]:
        ours = flow.bincount(t(x), *[t(a) for a in args], **kw)
        ref = torch.bincount(torch.tensor(x), *[torch.tensor(a) for a in args], **kw)
        assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6)
    assert flow.bincount(t(np.zeros(0, np.int64)), minlength=4).numpy().tolist() == [0] * 4
    with pytest.raises(OpError, match="bincount: the input must be non-negative"):
        flow.bincount(t(np.array([1, -1])))


def test_roc_auc_score_matches_rank_formula():
    score = flow.roc_auc_score(t(np.array([0, 0, 1, 1])), t(np.array([0.1, 0.4, 0.35, 0.8])))
    assert score.shape == (1,) and score.dtype is flow.float32
    assert score.numpy()[0] == pytest.approx(0.75)
    tie = flow.roc_auc_score(t(np.array([0, 1, 0, 1])), t(np.full(4, 0.5)))
    assert tie.numpy()[0] == pytest.approx(0.5)
    label = rng.integers(0, 2, 500)
    pred = np.round(rng.random(500), 2)  # ties count half
    pos, neg = pred[label == 1], pred[label == 0]
    want = ((pos[:, None] > neg[None]).sum() + 0.5 * (pos[:, None] == neg[None]).sum()) / (
        len(pos) * len(neg))
    assert flow.roc_auc_score(t(label), t(pred)).numpy()[0] == pytest.approx(want, rel=1e-6)


# ---- nansum / nanmean --------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [None, 0, 1])
def test_nansum_nanmean_match_numpy(dim):
    a = rng.standard_normal((4, 5))
    a[rng.random(a.shape) > 0.6] = np.nan
    np.testing.assert_allclose(flow.nansum(t(a), dim).numpy(), np.nansum(a, axis=dim))
    np.testing.assert_allclose(t(a).nanmean(dim).numpy(), np.nanmean(a, axis=dim))
    b = rng.standard_normal((3, 4))
    gradcheck(lambda x: flow.nanmean(x, dim), b)


# ---- quantile / nanquantile --------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_torch(fn, interpolation):
    a = rng.standard_normal((3, 5, 4))
    a[rng.random(a.shape) > 0.7] = np.nan
    a[0, :, 0] = np.nan  # an all-NaN row
    for q in (0.3, [0.0, 0.25, 0.5, 1.0]):
        for dim, keepdim in [(None, False), (None, True), (1, False), (-1, True)]:
            tq = torch.tensor(q, dtype=torch.float64) if isinstance(q, list) else q
            fq = t(np.array(q)) if isinstance(q, list) else q
            ref = getattr(torch, fn)(torch.tensor(a), tq, dim=dim, keepdim=keepdim,
                                     interpolation=interpolation)
            out = getattr(flow, fn)(t(a), fq, dim=dim, keepdim=keepdim,
                                    interpolation=interpolation)
            assert out.shape == tuple(ref.shape)
            np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


def test_quantile_gradient_and_errors():
    gradcheck(lambda x: flow.quantile(x, t(np.array([0.2, 0.9])), dim=1), rng.standard_normal(
        (3, 6)))
    gradcheck(lambda x: t(np.zeros(1)) + x.quantile(0.4), rng.standard_normal((2, 5)))
    with pytest.raises(ValueError, match="quantile: q values must be in the range"):
        flow.quantile(t(np.zeros(3)), 1.5)
    with pytest.raises(TypeError, match="quantile: expected a floating point input"):
        flow.quantile(t(np.arange(3)), 0.5)


# ---- graphs ---------------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_sort_family_in_graph_matches_eager():
    a = rng.standard_normal((4, 6)).astype(np.float32)

    def fn(x):
        s = flow.sort(x, 1, True)
        k = flow.topk(x, 2, 0)
        m = flow.median(x, 1)
        return (s.values, s.indices, k.values, m.values, m.indices, flow.mode(x, 0).values,
                flow.searchsorted(s.values.flip(1), x), flow.quantile(x, 0.3, dim=1))

    class G(flow.nn.Graph):
        def build(self, x):
            return fn(x)

    for ours, ref in zip(G()(t(a)), fn(t(a))):
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_value_dependent_ops_refuse_to_trace():
    class G(flow.nn.Graph):
        def build(self, x):
            return flow.unique(x)

    with pytest.raises(Exception, match="unique: the output shape depends on the input's values"):
        G()(t(np.array([1, 2, 2])))
