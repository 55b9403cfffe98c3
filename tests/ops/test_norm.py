"""batch_norm, layer_norm, group_norm: NumPy, PyTorch, running statistics, finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops import OpError
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(2)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _t(a, grad=False):
    return flow.tensor(a, requires_grad=grad)


def _per_channel(a, ndim):
    return a.reshape((-1,) + (1,) * (ndim - 2))


# ---- NumPy references ---------------------------------------------------------------------------

def test_batch_norm_training_forward_and_running_stats_numpy():
    x, w, b = _rand(4, 3, 5), _rand(3), _rand(3)
    rm, rv = np.zeros(3), np.ones(3)
    frm, frv = _t(rm.copy()), _t(rv.copy())
    y = flow.batch_norm(_t(x), frm, frv, _t(w), _t(b), training=True, momentum=0.3, eps=1e-3)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    ref = (x - _per_channel(mean, 3)) / np.sqrt(_per_channel(var, 3) + 1e-3)
    ref = ref * _per_channel(w, 3) + _per_channel(b, 3)
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-12)
    np.testing.assert_allclose(frm.numpy(), 0.3 * mean, atol=1e-12)
    np.testing.assert_allclose(frv.numpy(), 0.7 + 0.3 * x.var(axis=(0, 2), ddof=1), atol=1e-12)


def test_batch_norm_eval_uses_running_stats():
    x, rm, rv = _rand(3, 2, 2, 2), _rand(2), np.abs(_rand(2)) + 0.5
    frm, frv = _t(rm.copy()), _t(rv.copy())
    y = flow.batch_norm(_t(x), frm, frv, training=False, eps=1e-5)
    np.testing.assert_allclose(y.numpy(), (x - _per_channel(rm, 4))
                               / np.sqrt(_per_channel(rv, 4) + 1e-5), atol=1e-12)
    np.testing.assert_array_equal(frm.numpy(), rm)  # untouched in eval mode
    np.testing.assert_array_equal(frv.numpy(), rv)


def test_layer_norm_and_group_norm_numpy():
    x = _rand(2, 6, 3, 2)
    y = flow.layer_norm(_t(x), (3, 2), eps=1e-5)
    m, v = x.mean(axis=(2, 3), keepdims=True), x.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(y.numpy(), (x - m) / np.sqrt(v + 1e-5), atol=1e-12)
    w, b = _rand(6), _rand(6)
    y = flow.group_norm(_t(x), 3, _t(w), _t(b), eps=1e-5)
    g = x.reshape(2, 3, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    ref = ref.reshape(x.shape) * _per_channel(w, 4) + _per_channel(b, 4)
    np.testing.assert_allclose(y.numpy(), ref, atol=1e-12)


# ---- against PyTorch ----------------------------------------------------------------------------

def _check_grads(pairs, tol):
    for a, t in pairs:
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (2, 3, 4, 5)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_vs_torch(shape, training, affine, dtype, tol):
    x = _rand(*shape).astype(dtype)
    w, b = _rand(3).astype(dtype), _rand(3).astype(dtype)
    rm, rv = _rand(3).astype(dtype), (np.abs(_rand(3)) + 0.5).astype(dtype)
    fx, tx = _t(x, True), to_torch(x, True)
    fw, fb, tw, tb = _t(w, True), _t(b, True), to_torch(w, True), to_torch(b, True)
    frm, frv, trm, trv = _t(rm.copy()), _t(rv.copy()), to_torch(rm.copy()), to_torch(rv.copy())
    args = (fw, fb) if affine else (None, None)
    targs = (tw, tb) if affine else (None, None)
    for _ in range(2):  # two steps: the running statistics compound
        y = flow.batch_norm(fx, frm, frv, *args, training=training, momentum=0.2)
        ty = torch.nn.functional.batch_norm(tx, trm, trv, *targs, training=training,
                                            momentum=0.2)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(frm.numpy(), trm.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(frv.numpy(), trv.numpy(), rtol=tol, atol=tol)
    gy = _rand(*shape).astype(dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    _check_grads([(fx, tx)] + ([(fw, tw), (fb, tb)] if affine else []), tol * 10)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_float32_offset_and_strided_vs_torch_float64(training):
    # a large mean beside a small spread (the variance is taken on centred values), and an
    # input and gradient that are transposed views, not C-contiguous
    x = (1000.0 + 0.01 * _rand(4, 6, 5, 3)).astype(np.float32).transpose(0, 3, 2, 1)
    gy = _rand(4, 3, 5, 6).astype(np.float32).transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2)
    w, b = _rand(3).astype(np.float32), _rand(3).astype(np.float32)
    rm, rv = np.full(3, 1000.0, np.float32), np.full(3, 1e-4, np.float32)
    fx, fw, fb = _t(x, True), _t(w, True), _t(b, True)
    y = flow.batch_norm(fx, _t(rm.copy()), _t(rv.copy()), fw, fb, training=training)
    tx, tw, tb = (to_torch(a.astype(np.float64), True) for a in (x, w, b))
    ty = torch.nn.functional.batch_norm(tx, to_torch(rm.astype(np.float64)),
                                        to_torch(rv.astype(np.float64)), tw, tb,
                                        training=training)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-3, atol=2e-3)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy.astype(np.float64)))
    for a, t, scale in ((fx, tx, 100.0), (fw, tw, 1.0), (fb, tb, 1.0)):
        ref = t.grad.numpy()
        np.testing.assert_allclose(a.grad.numpy(), ref, rtol=1e-3,
                                   atol=1e-3 * scale * np.abs(ref).max())


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_batch_norm_without_running_stats_vs_torch():
    x = _rand(6, 2, 3)
    fx, tx = _t(x, True), to_torch(x, True)
    y = flow.batch_norm(fx, None, None, training=True)
    ty = torch.nn.functional.batch_norm(tx, None, None, training=True)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-10)
    gy = _rand(6, 2, 3)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    _check_grads([(fx, tx)], 1e-10)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("norm_shape,affine", [((5,), True), ((4, 5), True), ((5,), False)])
def test_layer_norm_vs_torch(norm_shape, affine, dtype, tol):
    x = _rand(2, 3, 4, 5).astype(dtype)
    w, b = _rand(*norm_shape).astype(dtype), _rand(*norm_shape).astype(dtype)
    fx, tx = _t(x, True), to_torch(x, True)
    fw, fb, tw, tb = _t(w, True), _t(b, True), to_torch(w, True), to_torch(b, True)
    y = flow.layer_norm(fx, norm_shape, *((fw, fb) if affine else ()), eps=1e-6)
    ty = torch.nn.functional.layer_norm(tx, norm_shape, *((tw, tb) if affine else ()), eps=1e-6)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = _rand(*x.shape).astype(dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    _check_grads([(fx, tx)] + ([(fw, tw), (fb, tb)] if affine else []), tol * 10)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_layer_norm_float32_rows_vs_torch_float64():
    """The float32 kernels on GPT-like rows, some of them constant or with a large offset
    (where the row mean's rounding matters), fed a transposed (strided) input."""
    x = (_rand(64, 300, 4) + 0.3).astype(np.float32)
    x[:, :10, 1] = np.float32(-3.7)  # constant rows: the output is the bias
    x[:, 10:20, 2] = np.float32(0.1)
    x[:, 20:30, 3] += np.float32(100.0)
    w, b = (1 + 0.1 * _rand(64)).astype(np.float32), _rand(64).astype(np.float32)
    gy = _rand(300, 4, 64).astype(np.float32)
    fx, fw, fb = _t(x, True), _t(w, True), _t(b, True)
    y = flow.layer_norm(fx.permute(1, 2, 0), (64,), fw, fb)
    y.backward(flow.tensor(gy))
    tx, tw, tb = (to_torch(a.astype(np.float64), True) for a in (x, w, b))
    ty = torch.nn.functional.layer_norm(tx.permute(1, 2, 0), (64,), tw, tb)
    ty.backward(to_torch(gy.astype(np.float64)))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6, atol=1e-6)
    out = y.detach().numpy()
    for const_rows in (out[:10, 1], out[10:20, 2]):
        np.testing.assert_array_equal(const_rows, np.broadcast_to(b, (10, 64)))
    # the gradients through the offset rows are limited by their mean stored in float32
    for a, t in ((fx, tx), (fw, tw), (fb, tb)):
        assert a.grad.dtype is flow.float32
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=2e-5)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-4)])
@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 3), 3), ((3, 4, 5), 1), ((2, 4), 4)])
def test_group_norm_vs_torch(shape, groups, dtype, tol):
    x = _rand(*shape).astype(dtype)
    C = shape[1]
    w, b = _rand(C).astype(dtype), _rand(C).astype(dtype)
    fx, tx = _t(x, True), to_torch(x, True)
    fw, fb, tw, tb = _t(w, True), _t(b, True), to_torch(w, True), to_torch(b, True)
    y = flow.group_norm(fx, groups, fw, fb)
    ty = torch.nn.functional.group_norm(tx, groups, tw, tb)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = _rand(*shape).astype(dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    _check_grads([(fx, tx), (fw, tw), (fb, tb)], tol * 10)


# ---- finite differences -------------------------------------------------------------------------

def test_norm_gradcheck():
    x, w, b = _rand(3, 2, 3), _rand(2), _rand(2)
    rm, rv = np.zeros(2), np.ones(2)
    gradcheck(lambda x, w, b: flow.batch_norm(x, _t(rm.copy()), _t(rv.copy()), w, b,
                                              training=True), x, w, b)
    gradcheck(lambda x, w, b: flow.batch_norm(x, _t(rm + 0.1), _t(rv * 2), w, b), x, w, b)
    gradcheck(lambda x, w, b: flow.layer_norm(x, (2, 3), w, b), x, _rand(2, 3), _rand(2, 3))
    gradcheck(lambda x, w, b: flow.group_norm(x, 2, w, b), _rand(2, 4, 3), _rand(4), _rand(4))


def test_norm_double_backward_raises_clearly():
    x = _t(_rand(3, 2), True)
    y = flow.batch_norm(x, None, None, training=True)
    (gx,) = flow.autograd.grad((y * y).sum(), [x], create_graph=True)
    with pytest.raises(NotImplementedError, match="batch_norm: double backward"):
        gx.sum().backward()


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,match", [
    (lambda x: flow.batch_norm(x, _t(np.zeros(4)), _t(np.ones(4))), r"running_mean must have "
                                                                    r"shape \(3,\)"),
    (lambda x: flow.batch_norm(x[:1, :, :1], _t(np.zeros(3)), _t(np.ones(3)), training=True),
     "more than 1 value per channel"),
    (lambda x: flow.batch_norm(x, None, None), "must be defined in evaluation mode"),
    (lambda x: flow.batch_norm(x, _t(np.zeros(3)), _t(np.ones(3)), _t(np.ones(2))),
     "weight must have shape"),
    (lambda x: flow.layer_norm(x, (3,)), r"normalized_shape \(3,\) does not match"),
    (lambda x: flow.group_norm(x, 2), "divisible by num_groups"),
])
def test_norm_errors(call, match):
    with pytest.raises((OpError, ValueError, TypeError), match=match):
        call(_t(_rand(2, 3, 4)))
