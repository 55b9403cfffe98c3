"""Linear-algebra breadth (issue #16): mm, mv, addmm, baddbmm, tensordot, cross, det, inv
against NumPy / PyTorch, gradients by finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(5)


def _rand(*shape):
    return RNG.standard_normal(shape)


def test_mm_mv_addmm_baddbmm():
    a, b, v = _rand(3, 4), _rand(4, 2), _rand(4)
    np.testing.assert_allclose(flow.mm(flow.tensor(a), flow.tensor(b)).numpy(), a @ b)
    np.testing.assert_allclose(flow.mv(flow.tensor(a), flow.tensor(v)).numpy(), a @ v)
    with pytest.raises(ValueError, match="mv"):
        flow.mv(flow.tensor(a), flow.tensor(b))
    c = _rand(3, 2)
    y = flow.addmm(flow.tensor(c), flow.tensor(a), flow.tensor(b), 0.5, 2.0)  # alpha, beta
    np.testing.assert_allclose(y.numpy(), 2.0 * c + 0.5 * (a @ b))
    nan = np.full((1, 2), np.nan)
    y = flow.addmm(flow.tensor(nan), flow.tensor(a), flow.tensor(b), beta=0)
    np.testing.assert_allclose(y.numpy(), a @ b)  # beta=0 ignores input, nan too
    gradcheck(lambda i, m1, m2: flow.addmm(i, m1, m2, alpha=1.5, beta=-0.5), c, a, b)
    i3, b1, b2 = _rand(2, 3, 1), _rand(2, 3, 4), _rand(2, 4, 5)
    y = flow.baddbmm(flow.tensor(i3), flow.tensor(b1), flow.tensor(b2), beta=2.0, alpha=1.2)
    np.testing.assert_allclose(y.numpy(), 2.0 * i3 + 1.2 * (b1 @ b2))
    gradcheck(lambda i, m1, m2: flow.baddbmm(i, m1, m2, beta=0.3, alpha=2.0), i3, b1, b2)


@pytest.mark.parametrize("sa,sb,dims", [((3, 4, 5), (4, 5, 2), 2), ((3, 4, 5), (5, 2), 1),
                                         ((2, 3, 4), (4, 3, 2), [[1, 2], [1, 0]]),
                                         ((2, 3, 4), (4, 3, 2), ([-1, -2], [0, 1])),
                                         ((2, 3), (4, 5), 0), ((2, 1, 4), (3, 4, 5), 2)])
def test_tensordot(sa, sb, dims):
    a, b = _rand(*sa), _rand(*sb)
    ref = torch.tensordot(to_torch(a), to_torch(b), dims=dims).numpy()
    np.testing.assert_allclose(flow.tensordot(flow.tensor(a), flow.tensor(b), dims).numpy(),
                               ref, rtol=1e-12)
    gradcheck(lambda x, y: flow.tensordot(x, y, dims), a, b)


def test_tensordot_tensor_dims():
    a = _rand(3, 4, 5)
    d = flow.tensor([2])
    ref = np.tensordot(a, a.transpose(1, 2, 0).reshape(4, 5, 3), 2)
    np.testing.assert_allclose(flow.tensordot(flow.tensor(a), flow.tensor(
        a.transpose(1, 2, 0).reshape(4, 5, 3)), d).numpy(), ref)


def test_cross():
    a, b = _rand(4, 3, 2), _rand(1, 3, 2)
    np.testing.assert_allclose(flow.cross(flow.tensor(a), flow.tensor(b)).numpy(),
                               np.cross(a, b, axis=1))
    a2, b2 = _rand(2, 3), _rand(2, 3)
    np.testing.assert_allclose(flow.linalg.cross(flow.tensor(a2), flow.tensor(b2)).numpy(),
                               np.cross(a2, b2))
    with pytest.raises(ValueError, match="size 3"):
        flow.linalg.cross(flow.tensor(a), flow.tensor(b))
    gradcheck(lambda x, y: flow.cross(x, y, dim=1), a, b)


def test_det_and_inv():
    a = _rand(2, 3, 4, 4) + 4 * np.eye(4)
    np.testing.assert_allclose(flow.linalg.det(flow.tensor(a)).numpy(), np.linalg.det(a),
                               rtol=1e-10)
    np.testing.assert_allclose(flow.linalg.inv(flow.tensor(a)).numpy(), np.linalg.inv(a),
                               rtol=1e-10)
    f32 = flow.tensor(a.astype(np.float32))
    assert flow.linalg.det(f32).dtype == flow.float32
    np.testing.assert_allclose(f32.inverse().numpy(), np.linalg.inv(a), rtol=1e-4, atol=1e-5)
    gradcheck(flow.linalg.det, a[0, :2])
    gradcheck(flow.linalg.inv, a[0, :2])
    with pytest.raises(RuntimeError, match="square"):
        flow.linalg.det(flow.tensor(_rand(2, 3)))
    with pytest.raises(Exception, match="not invertible"):
        flow.linalg.inv(flow.zeros(2, 2)).numpy()


def test_det_double_backward():
    a = flow.tensor(_rand(3, 3) + 3 * np.eye(3), requires_grad=True)
    (g,) = flow.autograd.grad(flow.linalg.det(a), a, create_graph=True)
    g.sum().backward()
    ta = to_torch(a.detach().numpy(), requires_grad=True)
    (tg,) = torch.autograd.grad(torch.linalg.det(ta), ta, create_graph=True)
    tg.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-8)


def test_dot_vdot_inner_outer_match_torch():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(5), rng.standard_normal(5)
    for name in ("dot", "vdot", "inner", "outer"):
        got = getattr(flow, name)(flow.tensor(a), flow.tensor(b))
        want = getattr(torch, name)(to_torch(a), to_torch(b))
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
        assert getattr(flow.tensor(a), name)(flow.tensor(b)).shape == got.shape
        gradcheck(getattr(flow, name), a, b)
    c = a + 1j * rng.standard_normal(5)
    d = b + 1j * rng.standard_normal(5)
    for name in ("dot", "vdot"):
        got = getattr(flow, name)(flow.tensor(c), flow.tensor(d))
        np.testing.assert_allclose(got.numpy(), getattr(torch, name)(to_torch(c), to_torch(d)))
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4))
    np.testing.assert_allclose(flow.inner(flow.tensor(x), flow.tensor(y)).numpy(),
                               torch.inner(to_torch(x), to_torch(y)).numpy(), atol=1e-12)
    gradcheck(flow.inner, x, y)
    ints = flow.tensor([1, 2, 3])
    assert flow.dot(ints, ints).item() == 14 and flow.outer(ints, ints).dtype is flow.int64
    with pytest.raises(RuntimeError, match="same dtype"):
        flow.dot(flow.tensor(a), flow.tensor(a, dtype=flow.float32))
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        flow.dot(flow.tensor(a), flow.tensor(b[:3]))
    with pytest.raises(ValueError, match="expected a 1-d tensor"):
        flow.dot(flow.tensor(x), flow.tensor(x))
