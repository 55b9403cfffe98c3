"""conv1d / conv2d / conv3d: naive NumPy loops, PyTorch, finite differences, errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as flow
from actorflow.ops import OpError
from tests.helpers import gradcheck, to_torch, torch


def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct n-d cross-correlation with explicit loops over output positions."""
    n = x.ndim - 2
    stride = (stride,) * n if isinstance(stride, int) else tuple(stride)
    dilation = (dilation,) * n if isinstance(dilation, int) else tuple(dilation)
    padding = (padding,) * n if isinstance(padding, int) else tuple(padding)
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    N, C = x.shape[:2]
    O, k = w.shape[0], w.shape[2:]
    outs = [(xp.shape[2 + i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    y = np.zeros((N, O, *outs))
    cg, og = C // groups, O // groups
    for o in range(O):
        g = o // og
        for pos in np.ndindex(*outs):
            sl = tuple(slice(p * s, p * s + d * (kk - 1) + 1, d)
                       for p, s, d, kk in zip(pos, stride, dilation, k))
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            y[(slice(None), o) + pos] = (patch * w[o]).reshape(N, -1).sum(axis=1)
        if b is not None:
            y[:, o] += b[o]
    return y


RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape)


# ---- forward against the naive loops ----------------------------------------------------------

@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), ((2, 1), (0, 1), (1, 2), 1),
])
def test_conv2d_matches_naive_loops(stride, padding, dilation, groups):
    x, w, b = _rand(2, 4, 7, 6), _rand(6, 4 // groups, 3, 2), _rand(6)
    y = flow.conv2d(flow.tensor(x), flow.tensor(w), flow.tensor(b), stride, padding, dilation,
                    groups)
    np.testing.assert_allclose(y.numpy(), conv_ref(x, w, b, stride, padding, dilation, groups),
                               rtol=1e-10, atol=1e-10)


def test_conv1d_and_conv3d_match_naive_loops():
    x, w = _rand(2, 3, 9), _rand(4, 3, 3)
    np.testing.assert_allclose(flow.conv1d(flow.tensor(x), flow.tensor(w), None, 2, 1, 2).numpy(),
                               conv_ref(x, w, None, 2, 1, 2), atol=1e-10)
    x, w = _rand(1, 2, 4, 5, 3), _rand(2, 1, 2, 3, 2)
    np.testing.assert_allclose(
        flow.conv3d(flow.tensor(x), flow.tensor(w), None, 1, 1, 1, 2).numpy(),
        conv_ref(x, w, None, 1, 1, 1, 2), atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 2), st.integers(0, 2), st.integers(1, 2), st.sampled_from([1, 2]),
       st.integers(1, 3), st.integers(5, 8), st.booleans())
def test_conv2d_property_against_naive(stride, padding, dilation, groups, k, size, bias):
    x = _rand(2, 2 * groups, size, size + 1)
    w = _rand(2 * groups, 2, k, k)
    b = _rand(2 * groups) if bias else None
    y = flow.conv2d(flow.tensor(x), flow.tensor(w), None if b is None else flow.tensor(b),
                    stride, padding, dilation, groups)
    np.testing.assert_allclose(y.numpy(), conv_ref(x, w, b, stride, padding, dilation, groups),
                               atol=1e-10)


def test_padding_same_and_valid():
    x, w = _rand(1, 2, 6, 5), _rand(3, 2, 4, 3)  # even kernel: asymmetric 'same' padding
    y = flow.conv2d(flow.tensor(x), flow.tensor(w), padding="same", dilation=(1, 2))
    assert tuple(y.shape) == (1, 3, 6, 5)
    yv = flow.conv2d(flow.tensor(x), flow.tensor(w), padding="valid")
    np.testing.assert_allclose(yv.numpy(), conv_ref(x, w), atol=1e-10)
    if torch is not None:
        ty = torch.nn.functional.conv2d(to_torch(x), to_torch(w), padding="same", dilation=(1, 2))
        np.testing.assert_allclose(y.numpy(), ty.numpy(), atol=1e-10)


def test_unbatched_input():
    x, w = _rand(3, 6, 6), _rand(4, 3, 3, 3)
    y = flow.conv2d(flow.tensor(x), flow.tensor(w), padding=1)
    np.testing.assert_allclose(y.numpy(), conv_ref(x[None], w, padding=1)[0], atol=1e-10)


# ---- against PyTorch: forward and backward ------------------------------------------------------

CASES_2D = [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=1, dilation=1, groups=1),
    dict(stride=1, padding=2, dilation=2, groups=1),
    dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2),
    dict(stride=1, padding="same", dilation=1, groups=4),
]


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-4)])
@pytest.mark.parametrize("case", CASES_2D)
def test_conv2d_forward_backward_vs_torch(case, dtype, tol):
    g = case["groups"]
    x = _rand(2, 4, 8, 7).astype(dtype)
    w = _rand(8, 4 // g, 3, 3).astype(dtype)
    b = _rand(8).astype(dtype)
    fx, fw, fb = (flow.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (to_torch(a, True) for a in (x, w, b))
    y = flow.conv2d(fx, fw, fb, **case)
    ty = torch.nn.functional.conv2d(tx, tw, tb, **case)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = _rand(*ty.shape).astype(dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    for a, t in ((fx, tx), (fw, tw), (fb, tb)):
        assert a.grad.dtype == a.dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol * 10)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("fn,xs,ws,kw", [
    ("conv1d", (2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv1d", (3, 7), (2, 3, 2), dict(padding="same")),
    ("conv3d", (1, 2, 5, 4, 6), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
])
def test_conv1d_conv3d_vs_torch(fn, xs, ws, kw):
    x, w = _rand(*xs), _rand(*ws)
    fx, fw = flow.tensor(x, requires_grad=True), flow.tensor(w, requires_grad=True)
    tx, tw = to_torch(x, True), to_torch(w, True)
    y = getattr(flow, fn)(fx, fw, **kw)
    ty = getattr(torch.nn.functional, fn)(tx, tw, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-10)
    gy = _rand(*ty.shape)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), atol=1e-10)


# ---- finite differences -------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=1, dilation=2),
                                dict(groups=2, padding=(0, 1))])
def test_conv2d_gradcheck(kw):
    g = kw.get("groups", 1)
    gradcheck(lambda x, w, b: flow.conv2d(x, w, b, **kw), _rand(1, 2, 5, 4),
              _rand(2, 2 // g, 2, 3), _rand(2))


def test_conv1d_gradcheck():
    gradcheck(lambda x, w: flow.conv1d(x, w, stride=2, padding=1), _rand(2, 2, 6), _rand(3, 2, 3))


def test_conv_grad_ops_have_gradients():
    """The gradient ops are differentiable ops themselves (double backward)."""
    attrs = ((2, 1), ((1, 1), (0, 0)), (1, 1), 1)
    x, w = _rand(1, 2, 5, 4), _rand(3, 2, 2, 2)
    dout = flow.conv2d(flow.tensor(x), flow.tensor(w), stride=(2, 1), padding=(1, 0))
    gradcheck(lambda d, w: flow.conv_grad_input(d, w, x.shape, *attrs), dout.numpy(), w)
    gradcheck(lambda x, d: flow.conv_grad_weight(x, d, w.shape, *attrs), x, dout.numpy())


def test_double_backward_records_grad_ops():
    x = flow.tensor(_rand(1, 2, 4, 4), requires_grad=True)
    w = flow.tensor(_rand(2, 2, 3, 3), requires_grad=True)
    y = flow.conv2d(x, w, padding=1)
    (gx,) = flow.autograd.grad((y * y).sum(), [x], create_graph=True)
    assert gx.grad_fn is not None
    gx.sum().backward()
    assert w.grad is not None and tuple(w.grad.shape) == (2, 2, 3, 3)


def test_float16_input_close_to_float32():
    x, w = _rand(1, 2, 5, 5), _rand(3, 2, 3, 3)
    y16 = flow.conv2d(flow.tensor(x.astype(np.float16)), flow.tensor(w.astype(np.float16)))
    assert y16.dtype == flow.float16
    np.testing.assert_allclose(y16.numpy().astype(np.float64), conv_ref(x, w), atol=0.05)


# ---- errors --------------------------------------------------------------------------------------

def test_channel_mismatch_names_op_and_shapes():
    x, w = flow.tensor(_rand(2, 4, 5, 5)), flow.tensor(_rand(8, 3, 3, 3))
    with pytest.raises(OpError, match=r"conv2d.*3 channels.*got 4.*\(2, 4, 5, 5\).*\(8, 3, 3, 3\)"):
        flow.conv2d(x, w)


@pytest.mark.parametrize("call,match", [
    (lambda x, w: flow.conv2d(x, w, stride=2, padding="same"), "not supported for strided"),
    (lambda x, w: flow.conv2d(x, w, padding="full"), "invalid padding string"),
    (lambda x, w: flow.conv2d(x, w, groups=3), "divisible by groups"),
    (lambda x, w: flow.conv2d(x[0, 0], w), "expected a 4-d input"),
    (lambda x, w: flow.conv2d(x, w, stride=0), "stride must be positive"),
    (lambda x, w: flow.conv2d(x[:, :, :2, :2], w), "smaller than the"),
    (lambda x, w: flow.conv2d(x, w, flow.tensor(np.zeros(3))), "bias must have shape"),
    (lambda x, w: flow.conv2d(x.float(), w), "dtypes differ"),
    (lambda x, w: flow.conv1d(x, w), "expected a 3-d weight"),
])
def test_conv_errors(call, match):
    x, w = flow.tensor(_rand(2, 4, 5, 5)), flow.tensor(_rand(8, 4, 3, 3))
    with pytest.raises((OpError, ValueError, TypeError), match=match):
        call(x, w)
