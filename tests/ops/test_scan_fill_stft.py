"""logcumsumexp, cummax / cummin, index_fill / index_fill_, histc and stft: values and
gradients against PyTorch, float64 finite differences, errors naming the op, inside
nn.Graph."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import FnGraph, gradcheck, torch

RNG = np.random.default_rng(9)


def _pair(a, grad=True):
    return flow.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _project(y, ty):
    w = RNG.standard_normal(tuple(ty.shape))
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()


# ---- scans --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_running_extrema_match_torch(name, dim):
    a = RNG.integers(-3, 3, size=(4, 6)).astype(np.float64)  # many ties
    a[2, 3] = np.nan
    a[1, 1] = np.nan
    v, i = getattr(flow, name)(flow.tensor(a), dim)
    tv, ti = getattr(torch, name)(torch.tensor(a), dim)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert i.dtype is flow.int64
    ints = RNG.integers(-5, 5, size=(3, 5))
    r = getattr(flow.tensor(ints), name)(dim)
    tr = getattr(torch.tensor(ints), name)(dim)
    np.testing.assert_array_equal(r.values.numpy(), tr.values.numpy())
    np.testing.assert_array_equal(r.indices.numpy(), tr.indices.numpy())
    x, tx = _pair(RNG.standard_normal((3, 5)))
    _project(getattr(flow, name)(x, dim)[0], getattr(torch, name)(tx, dim)[0])
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_matches_torch(dim):
    a = RNG.standard_normal((4, 5)) * 40  # exp would overflow float32 alone
    a[0, 0] = -np.inf
    x, tx = _pair(a)
    y, ty = flow.logcumsumexp(x, dim), torch.logcumsumexp(tx, dim)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    _project(y, ty)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    f32 = flow.tensor(a.astype(np.float32)).logcumsumexp(dim)
    assert f32.dtype is flow.float32
    np.testing.assert_allclose(f32.numpy(), ty.detach().numpy(), rtol=1e-5)
    assert flow.logcumsumexp(flow.tensor([1, 2]), 0).dtype is flow.float32


def test_scan_gradients_against_finite_differences():
    a = RNG.standard_normal((3, 4))
    gradcheck(lambda x: flow.logcumsumexp(x, 1), a)
    gradcheck(lambda x: flow.logcumsumexp(x, 0), a)
    gradcheck(lambda x: flow.cummax(x, 1).values, a)
    gradcheck(lambda x: flow.cummin(x, 0).values, a)
    x, tx = _pair(a)  # second order through the gradient's functional ops
    (g,) = flow.autograd.grad((flow.logcumsumexp(x, 1) ** 2).sum(), [x], create_graph=True)
    (tg,) = torch.autograd.grad((torch.logcumsumexp(tx, 1) ** 2).sum(), [tx],
                                create_graph=True)
    (gg,) = flow.autograd.grad(g.sum(), [x])
    (tgg,) = torch.autograd.grad(tg.sum(), [tx])
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-8, atol=1e-10)


def test_scans_of_0d_and_empty_tensors():
    for name in ("cummax", "cummin"):
        v, i = getattr(flow, name)(flow.tensor(2.5), 0)
        assert v.item() == 2.5 and i.item() == 0
        v, i = getattr(flow, name)(flow.zeros(0, 3), 0)
        assert v.shape == (0, 3) and i.shape == (0, 3)
    assert flow.logcumsumexp(flow.tensor(1.5), 0).item() == 1.5
    with pytest.raises(Exception, match="cummax: dim 2 is out of range"):
        flow.cummax(flow.ones(2, 2), 2)


# ---- index_fill ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dim,index", [(0, [1, 3]), (1, [0, -1, 0]), (-1, 2), (1, [])])
def test_index_fill_matches_torch(dim, index):
    a = RNG.standard_normal((4, 5))
    idx = np.array(index, dtype=np.int64)
    x, tx = _pair(a)
    y = flow.index_fill(x * 1, dim, flow.tensor(idx), -2.5)
    ty = torch.index_fill(tx * 1, dim, torch.tensor(idx), -2.5)
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    # (PyTorch's backward refuses negative indices; they mean the same as idx % size)
    ty = torch.index_fill(tx * 1, dim, torch.tensor(idx % a.shape[dim]), -2.5)
    _project(y, ty)
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    # in place, as a method, on integers, with a 0-d value tensor that gets a gradient
    z, tz = flow.tensor(a), torch.tensor(a)
    assert z.index_fill_(dim, flow.tensor(idx), 7) is z
    tz.index_fill_(dim, torch.tensor(idx), 7)
    np.testing.assert_array_equal(z.numpy(), tz.numpy())
    ints = RNG.integers(0, 9, size=(4, 5))
    np.testing.assert_array_equal(
        flow.tensor(ints).index_fill(dim, flow.tensor(idx), -1).numpy(),
        torch.tensor(ints).index_fill(dim, torch.tensor(idx), -1).numpy())
    (v, tv), (x, tx) = _pair(np.array(0.5)), _pair(a)
    _project(flow.index_fill(x, dim, flow.tensor(idx), v),
             torch.index_fill(tx, dim, torch.tensor(idx % a.shape[dim]), tv))
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.timeout(30)
def test_index_fill_errors():
    with pytest.raises(RuntimeError, match="index_fill: index 5 is out of range for dimension"
                                           " 1 with size 5"):
        flow.index_fill(flow.ones(2, 5), 1, flow.tensor([5]), 0.0).numpy()
    with pytest.raises(Exception, match="index_fill: index must be a 0-d or 1-d integer"):
        flow.index_fill(flow.ones(2, 5), 1, flow.tensor([0.5]), 0.0)
    with pytest.raises(ValueError, match="index_fill: only a 0-d value tensor"):
        flow.index_fill(flow.ones(2, 5), 1, flow.tensor([0]), flow.ones(2))


# ---- histc --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"bins": 7}, {"bins": 5, "min": -1, "max": 1.5},
                                {"bins": 4, "min": 2, "max": 2}])
def test_histc_matches_torch(kw):
    a = RNG.standard_normal(500)
    for dtype in (np.float64, np.float32):
        got = flow.histc(flow.tensor(a.astype(dtype)), **kw)
        want = torch.histc(torch.tensor(a.astype(dtype)), **kw)
        assert got.dtype.name == str(want.dtype).split(".")[1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    same = flow.tensor([3.0, 3.0, 3.0]).histc(bins=4)
    np.testing.assert_array_equal(same.numpy(), torch.histc(torch.tensor([3.0] * 3), 4).numpy())


@pytest.mark.timeout(30)
def test_histc_errors():
    with pytest.raises(Exception, match="histc: max must be larger than min"):
        flow.histc(flow.ones(3), bins=4, min=2, max=1)
    with pytest.raises(Exception, match="histc: bins must be a positive int"):
        flow.histc(flow.ones(3), bins=0)
    with pytest.raises(Exception, match="histc: expects a floating point input"):
        flow.histc(flow.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="histc: range of .* is not finite"):
        flow.histc(flow.tensor([1.0, float("inf")])).numpy()


# ---- stft ---------------------------------------------------------------------------------------

STFT_CASES = [
    ((100,), dict(n_fft=16)),
    ((3, 80), dict(n_fft=16, hop_length=5, win_length=10, center=False)),
    ((2, 64), dict(n_fft=8, normalized=True, onesided=False, pad_mode="constant")),
    ((50,), dict(n_fft=12, win_length=7, pad_mode="replicate")),
    ((2, 40), dict(n_fft=9, hop_length=3, pad_mode="circular")),
]


@pytest.mark.parametrize("shape,kw", STFT_CASES)
@pytest.mark.parametrize("with_window", [True, False])
def test_stft_matches_torch(shape, kw, with_window):
    a = RNG.standard_normal(shape)
    win = RNG.standard_normal(kw.get("win_length", kw["n_fft"])) if with_window else None
    x, tx = _pair(a)
    y = flow.stft(x, window=None if win is None else flow.tensor(win), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ty = torch.stft(tx, window=None if win is None else torch.tensor(win),
                        return_complex=False, **kw)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=1e-12)
    _project(y, ty)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    c = flow.tensor(a).stft(return_complex=True, **kw)
    assert c.dtype is flow.complex128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's note on the rectangular window
        tc = torch.stft(torch.tensor(a), return_complex=True, **kw)
    np.testing.assert_allclose(c.numpy(), tc.numpy(), atol=1e-12)


def test_stft_of_a_complex_signal_and_finite_differences():
    z = RNG.standard_normal((2, 30)) + 1j * RNG.standard_normal((2, 30))
    got = flow.stft(flow.tensor(z), 8, return_complex=True)
    np.testing.assert_allclose(got.numpy(), torch.stft(torch.tensor(z), 8,
                                                       return_complex=True).numpy(), atol=1e-12)
    with pytest.raises(RuntimeError, match="stft: a complex input or window has no one-sided"):
        flow.stft(flow.tensor(z), 8, onesided=True)
    gradcheck(lambda x, w: flow.stft(x, 8, hop_length=3, window=w), RNG.standard_normal(24),
              RNG.standard_normal(8))


def test_stft_errors_match_oneflow_messages():
    x = flow.tensor(np.arange(1, 13, dtype=float).reshape(4, 3))
    with pytest.raises(RuntimeError, match="Expected a 1D or 2D tensor,but got 3D"):
        flow.stft(x.reshape(2, 2, 3), n_fft=4)
    with pytest.raises(RuntimeError, match="Expected 0 < n_fft"):
        flow.stft(x, n_fft=-1)
    with pytest.raises(RuntimeError, match="Expected hop_length > 0, but got"):
        flow.stft(x, n_fft=4, hop_length=-1)
    with pytest.raises(RuntimeError, match="Expected 0 < win_length <=n_fft ,but got"):
        flow.stft(x, n_fft=4, win_length=-1)
    with pytest.raises(RuntimeError, match="Expected a 1D window tensor of size equal to "
                                           "win_length="):
        flow.stft(x.reshape(2, 6), n_fft=4, window=flow.ones(9))


def test_in_graph_matches_eager():
    a, idx = flow.tensor(RNG.standard_normal((3, 40))), flow.tensor([0, 2])

    def fn(x, i):
        s = flow.stft(x, 8, return_complex=False).sum()
        return (flow.logcumsumexp(x, 1).sum() + flow.cummax(x, 1).values.sum()
                + flow.cummin(x, 0).values.sum() + flow.index_fill(x, 0, i, 1.5).sum() + s
                + flow.histc(x, bins=6, min=-2, max=2).sum())

    np.testing.assert_allclose(FnGraph(fn)(a, idx).numpy(), fn(a, idx).numpy(), rtol=1e-12)
