"""Pooling: max / avg / adaptive avg against naive loops, PyTorch and finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops import OpError
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(1)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _out_len(L, k, s, p, d, ceil_mode):
    span = L + 2 * p - d * (k - 1) - 1
    o = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= L + p:
        o -= 1
    return o


def max_pool2d_ref(x, k, s, p, d=1, ceil_mode=False):
    """Max over the in-bounds window elements; returns values and flat argmax indices."""
    N, C, H, W = x.shape
    oh, ow = _out_len(H, k, s, p, d, ceil_mode), _out_len(W, k, s, p, d, ceil_mode)
    val = np.empty((N, C, oh, ow))
    idx = np.empty((N, C, oh, ow), np.int64)
    for n, c, i, j in np.ndindex(N, C, oh, ow):
        best, arg = -np.inf, -1
        for a in range(k):
            for b in range(k):
                r, q = i * s - p + a * d, j * s - p + b * d
                if 0 <= r < H and 0 <= q < W and x[n, c, r, q] > best:
                    best, arg = x[n, c, r, q], r * W + q
        val[n, c, i, j], idx[n, c, i, j] = best, arg
    return val, idx


def avg_pool2d_ref(x, k, s, p, ceil_mode=False, count_include_pad=True):
    N, C, H, W = x.shape
    oh, ow = _out_len(H, k, s, p, 1, ceil_mode), _out_len(W, k, s, p, 1, ceil_mode)
    out = np.empty((N, C, oh, ow))
    for i, j in np.ndindex(oh, ow):
        r0, c0 = i * s - p, j * s - p
        r1, c1 = min(r0 + k, H + p), min(c0 + k, W + p)
        size = (r1 - r0) * (c1 - c0)
        r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, H), min(c1, W)
        total = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3))
        out[:, :, i, j] = total / (size if count_include_pad else (r1 - r0) * (c1 - c0))
    return out


def adaptive_avg_ref(x, out_size):
    N, C, H, W = x.shape
    oh, ow = out_size
    out = np.empty((N, C, oh, ow))
    for i, j in np.ndindex(oh, ow):
        r0, r1 = (i * H) // oh, math.ceil((i + 1) * H / oh)
        c0, c1 = (j * W) // ow, math.ceil((j + 1) * W / ow)
        out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return out


# ---- forward against the naive loops ----------------------------------------------------------

@pytest.mark.parametrize("k,s,p,d,ceil", [(2, 2, 0, 1, False), (3, 2, 1, 1, False),
                                          (3, 2, 1, 1, True), (2, 1, 1, 2, False),
                                          (3, 3, 1, 1, True)])
def test_max_pool2d_matches_loops(k, s, p, d, ceil):
    x = _rand(2, 3, 7, 8)
    val, idx = flow.max_pool2d(flow.tensor(x), k, s, p, d, ceil, return_indices=True)
    rv, ri = max_pool2d_ref(x, k, s, p, d, ceil)
    np.testing.assert_array_equal(val.numpy(), rv)
    np.testing.assert_array_equal(idx.numpy(), ri)
    assert idx.dtype == flow.int64


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("k,s,p,d,ceil", [(2, 2, 0, 1, False), (3, 2, 1, 1, True),
                                          (2, 1, 1, 2, False), (3, 1, 1, 1, False)])
def test_max_pool2d_ties_take_the_first_position(dtype, k, s, p, d, ceil):
    # the running maximum over kernel positions keeps the first of equal values, as argmax
    x = RNG.integers(-2, 2, (2, 3, 7, 8)).astype(dtype)
    val, idx = flow.max_pool2d(flow.tensor(x), k, s, p, d, ceil, return_indices=True)
    rv, ri = max_pool2d_ref(x.astype(np.float64), k, s, p, d, ceil)
    np.testing.assert_array_equal(val.numpy(), rv.astype(dtype))
    np.testing.assert_array_equal(idx.numpy(), ri)


def test_max_pool2d_integer_minimum_beside_padding():
    # the padding holds the dtype's minimum; an input equal to it must still get an in-plane index
    x = RNG.integers(-3, 3, (1, 2, 5, 6)).astype(np.int32)
    x[0, 0, :2, :3] = np.iinfo(np.int32).min
    val, idx = flow.max_pool2d(flow.tensor(x), 3, 2, 1, return_indices=True)
    rv, _ = max_pool2d_ref(x.astype(np.float64), 3, 2, 1)
    np.testing.assert_array_equal(val.numpy(), rv.astype(np.int32))
    planes = x.reshape(2, -1)
    picked = np.take_along_axis(planes, idx.numpy().reshape(2, -1), axis=1)
    np.testing.assert_array_equal(picked.reshape(val.shape), val.numpy())


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16])
def test_max_pool2d_half_finite_input_takes_the_running_maximum(monkeypatch, dtype):
    # 60000 float16 3.0s sum to inf in float16: the finiteness check must not overflow, else
    # every half input went through the gathered windows and argmax
    from actorflow.ops import pool
    calls = []
    slow = pool._max_forward_argmax
    monkeypatch.setattr(pool, "_max_forward_argmax", lambda *a: calls.append(1) or slow(*a))
    x = np.full((2, 3, 100, 100), 3.0)
    x[:, :, ::7, ::5] = -1.5
    val, idx = flow.max_pool2d(flow.tensor(x, dtype=dtype), 3, 2, 1, return_indices=True)
    rv, ri = max_pool2d_ref(x, 3, 2, 1)
    assert calls == []
    np.testing.assert_array_equal(val.float().numpy(), rv.astype(np.float32))
    np.testing.assert_array_equal(idx.numpy(), ri)
    x[0, 0, 5, 5] = np.inf  # the spy does see the slow path
    flow.max_pool2d(flow.tensor(x, dtype=dtype), 3, 2, 1).numpy()
    assert calls == [1]


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_max_pool_non_finite_and_large_kernels_vs_torch():
    x = _rand(2, 3, 7, 8).astype(np.float32)
    x[0, 0, 1, 1] = x[1, 2, 4, 5] = np.inf
    x[0, 1, :4, :4] = -np.inf  # a window of -inf only, next to the -inf padding
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    val, idx = flow.max_pool2d(flow.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(val.numpy(), tv.numpy())
    finite = np.isfinite(tv.numpy())  # among equal -inf, PyTorch and argmax may differ
    np.testing.assert_array_equal(idx.numpy()[finite], ti.numpy()[finite])
    x[1, 1, 2, 3] = np.nan
    val = flow.max_pool2d(flow.tensor(x), 3, 2, 1).numpy()
    np.testing.assert_array_equal(val, torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1))
    # 7x7x7 = 343 kernel positions: more than the running maximum's uint8 position counter
    x = _rand(1, 2, 8, 9, 8)
    tv, ti = torch.nn.functional.max_pool3d(torch.tensor(x), 7, 1, 3, return_indices=True)
    val, idx = flow.max_pool3d(flow.tensor(x), 7, 1, 3, return_indices=True)
    np.testing.assert_array_equal(val.numpy(), tv.numpy())
    np.testing.assert_array_equal(idx.numpy(), ti.numpy())


@pytest.mark.parametrize("k,s,p,ceil,inc", [(2, 2, 0, False, True), (3, 2, 1, False, True),
                                            (3, 2, 1, False, False), (3, 2, 1, True, True),
                                            (3, 2, 1, True, False), (2, 3, 1, True, True)])
def test_avg_pool2d_matches_loops(k, s, p, ceil, inc):
    x = _rand(2, 2, 7, 8)
    y = flow.avg_pool2d(flow.tensor(x), k, s, p, ceil, inc)
    np.testing.assert_allclose(y.numpy(), avg_pool2d_ref(x, k, s, p, ceil, inc), atol=1e-12)


@pytest.mark.parametrize("size", [(1, 1), (3, 4), (7, 5), (4, 2)])
def test_adaptive_avg_pool2d_matches_loops(size):
    x = _rand(2, 3, 7, 5)
    y = flow.adaptive_avg_pool2d(flow.tensor(x), size)
    np.testing.assert_allclose(y.numpy(), adaptive_avg_ref(x, size), atol=1e-12)


def test_adaptive_output_size_forms():
    x = flow.tensor(_rand(2, 3, 6, 5))
    assert tuple(flow.adaptive_avg_pool2d(x, 2).shape) == (2, 3, 2, 2)
    assert tuple(flow.adaptive_avg_pool2d(x, (None, 3)).shape) == (2, 3, 6, 3)
    assert tuple(flow.adaptive_avg_pool2d(x[0], (4, None)).shape) == (3, 4, 5)


def test_default_stride_is_kernel_size_and_unbatched():
    x = _rand(3, 6, 6)
    y = flow.max_pool2d(flow.tensor(x), 2)
    np.testing.assert_array_equal(y.numpy(), max_pool2d_ref(x[None], 2, 2, 0)[0][0])


# ---- against PyTorch ----------------------------------------------------------------------------

def _compare(fn, args, kw, x, dtype, tol):
    x = x.astype(dtype)
    fx, tx = flow.tensor(x, requires_grad=True), to_torch(x, True)
    y = getattr(flow, fn)(fx, *args, **kw)
    ty = getattr(torch.nn.functional, fn)(tx, *args, **kw)
    if isinstance(y, tuple):
        np.testing.assert_array_equal(y[1].numpy(), ty[1].numpy())
        y, ty = y[0], ty[0]
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = _rand(*ty.shape).astype(dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


TORCH_CASES = [
    ("max_pool2d", (3,), dict(stride=2, padding=1)),
    ("max_pool2d", ((2, 3),), dict(stride=(2, 1), padding=(1, 0), dilation=(2, 1),
                                   ceil_mode=True, return_indices=True)),
    ("max_pool2d", (3,), dict(stride=1, padding=1)),  # overlapping windows share maxima
    ("max_pool1d", (3,), dict(stride=2, padding=1, return_indices=True)),
    ("max_pool3d", (2,), dict(stride=1, padding=1)),
    # windows that do not overlap: the gradient is a plain scatter (the grad op's disjoint attr)
    ("max_pool2d", (2,), dict(stride=2)),
    ("max_pool2d", (2,), dict(stride=3, padding=1, ceil_mode=True, return_indices=True)),
    ("max_pool2d", ((2, 3),), dict(stride=(3, 5), padding=1, dilation=2)),
    ("max_pool3d", (2,), dict(stride=2, padding=1)),
    ("avg_pool2d", (3,), dict(stride=2, padding=1, count_include_pad=False)),
    ("avg_pool2d", ((3, 2),), dict(stride=(2, 3), padding=1, ceil_mode=True)),
    ("avg_pool2d", (3,), dict(stride=2, padding=1, divisor_override=4)),
    ("avg_pool1d", (4,), dict(stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    ("avg_pool3d", (2,), dict(stride=2, padding=1)),
    ("adaptive_avg_pool2d", ((3, 4),), {}),
    ("adaptive_avg_pool1d", (4,), {}),
    ("adaptive_avg_pool3d", ((2, 3, 1),), {}),
]


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("fn,args,kw", TORCH_CASES)
def test_pool_vs_torch(fn, args, kw, dtype, tol):
    ndim = int(fn[-2])
    shape = {1: (2, 3, 11), 2: (2, 3, 9, 7), 3: (1, 2, 5, 4, 6)}[ndim]
    _compare(fn, args, kw, _rand(*shape), dtype, tol)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_pool_unbatched_vs_torch():
    _compare("max_pool2d", (2,), {}, _rand(3, 6, 5), np.float64, 1e-12)
    _compare("avg_pool1d", (3,), dict(stride=2), _rand(3, 9), np.float64, 1e-12)


# ---- finite differences -------------------------------------------------------------------------

def test_pool_gradcheck():
    x = _rand(1, 2, 5, 6)
    gradcheck(lambda t: flow.max_pool2d(t, 3, 2, 1), x)
    gradcheck(lambda t: flow.max_pool2d(t, 2, 2, 1), x)  # disjoint windows
    gradcheck(lambda t: flow.avg_pool2d(t, 3, 2, 1, True, False), x)
    gradcheck(lambda t: flow.adaptive_avg_pool2d(t, (2, 4)), x)
    gradcheck(lambda t: flow.avg_pool1d(t, 2, 1, 1), _rand(2, 2, 5))


def test_pool_grad_ops_have_gradients():
    x = _rand(1, 2, 5, 6)
    attrs = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True,
             "count_include_pad": False, "divisor_override": None}
    dout = flow.avg_pool_nd(flow.tensor(x), attrs).numpy()
    gradcheck(lambda d: flow.avg_pool_grad(d, x.shape, attrs), dout)
    gradcheck(lambda d: flow.adaptive_avg_pool_grad(d, x.shape), _rand(1, 2, 3, 4))
    _, idx = flow.max_pool2d(flow.tensor(x), 2, 1, return_indices=True)
    gradcheck(lambda d: flow.max_pool_grad(d, idx, x.shape), _rand(*idx.shape))


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda x: flow.max_pool2d(x, 3, padding=2), "at most half"),
    (lambda x: flow.max_pool2d(x, 7), r"output would be empty.*\(1, 2, 5, 6\)"),
    (lambda x: flow.avg_pool2d(x[0, 0], 2), "expected a 3-d or 4-d input"),
    (lambda x: flow.avg_pool2d(x, (2, 2, 2)), "kernel_size needs 2 values"),
    (lambda x: flow.max_pool2d(x, 2, stride=0), "must be positive"),
    (lambda x: flow.adaptive_avg_pool2d(x, (1, 2, 3)), "needs 2 values"),
    (lambda x: flow.avg_pool2d(x.long(), 2), "floating point"),
])
def test_pool_errors(call, match):
    with pytest.raises((OpError, ValueError, TypeError), match=match):
        call(flow.tensor(_rand(1, 2, 5, 6)))
