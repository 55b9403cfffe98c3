"""flow.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) vs
torch.autograd.functional in float64: single and tuple inputs/outputs, strict mode, create_graph
(second derivatives of the results), vectorize and the forward strategy."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.autograd.functional as AF
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(torch is None, reason="needs PyTorch"),
              pytest.mark.timeout(120)]

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3,))
Y = RNG.standard_normal((3, 2))


def _both(*arrays):
    return tuple(flow.tensor(a) for a in arrays), tuple(torch.tensor(a) for a in arrays)


def _close(a, b, atol=1e-10):
    if isinstance(b, (tuple, list)):
        assert isinstance(a, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, atol)
        return
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol)


def cube(x):
    return x ** 3 * 2


def pair(x, y):
    return (x @ y.tanh()), (x * x).sum() + y.sin().sum()


def scalar(x, y):
    return (x.sin() @ y).exp().sum() + (x * x * x).sum()


def scalar1(x):
    return (x.exp() * x.sin()).sum()


def only_x(x, y):
    return x * 2


@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp_and_jvp(create_graph):
    (fx, fy), (tx, ty) = _both(X, Y)
    v_out = (flow.tensor(RNG.standard_normal(2)), flow.tensor(1.5))
    tv_out = tuple(torch.tensor(a.numpy()) for a in v_out)
    f = AF.vjp(pair, (fx, fy), v_out, create_graph=create_graph)
    t = torch.autograd.functional.vjp(pair, (tx, ty), tv_out, create_graph=create_graph)
    _close(f, t)
    f = AF.vjp(cube, fx, flow.tensor(Y[:, 0]))
    t = torch.autograd.functional.vjp(cube, tx, torch.tensor(Y[:, 0]))
    _close(f, t)
    v_in = (flow.tensor(Y[:, 1]), flow.tensor(RNG.standard_normal((3, 2))))
    tv_in = tuple(torch.tensor(a.numpy()) for a in v_in)
    f = AF.jvp(pair, (fx, fy), v_in, create_graph=create_graph)
    t = torch.autograd.functional.jvp(pair, (tx, ty), tv_in, create_graph=create_graph)
    _close(f, t)
    _close(AF.jvp(cube, fx, v_in[0]), torch.autograd.functional.jvp(cube, tx, tv_in[0]))
    # one-element input: v may be omitted
    _close(AF.jvp(cube, flow.tensor([0.7])), torch.autograd.functional.jvp(
        cube, torch.tensor([0.7])))


@pytest.mark.parametrize("vectorize,strategy", [(False, "reverse-mode"),
                                                (True, "reverse-mode"),
                                                (True, "forward-mode")])
def test_jacobian(vectorize, strategy):
    (fx, fy), (tx, ty) = _both(X, Y)
    kw = dict(vectorize=vectorize, strategy=strategy)
    _close(AF.jacobian(pair, (fx, fy), **kw),
           torch.autograd.functional.jacobian(pair, (tx, ty), **kw))
    _close(AF.jacobian(cube, fx, **kw), torch.autograd.functional.jacobian(cube, tx, **kw))
    _close(AF.jacobian(lambda x: (cube(x),), fx, **kw),
           torch.autograd.functional.jacobian(lambda x: (cube(x),), tx, **kw))


def test_hessian_vhp_hvp():
    (fx, fy), (tx, ty) = _both(X, Y)
    _close(AF.hessian(scalar, (fx, fy)), torch.autograd.functional.hessian(scalar, (tx, ty)))
    _close(AF.hessian(scalar1, fx), torch.autograd.functional.hessian(scalar1, tx))
    _close(AF.hessian(scalar1, fx, vectorize=True, outer_jacobian_strategy="forward-mode"),
           torch.autograd.functional.hessian(scalar1, tx, vectorize=True,
                                             outer_jacobian_strategy="forward-mode"))
    v = (flow.tensor(RNG.standard_normal(3)), flow.tensor(RNG.standard_normal((3, 2))))
    tv = tuple(torch.tensor(a.numpy()) for a in v)
    for fn, tfn in ((AF.vhp, torch.autograd.functional.vhp),
                    (AF.hvp, torch.autograd.functional.hvp)):
        _close(fn(scalar, (fx, fy), v), tfn(scalar, (tx, ty), tv))
        _close(fn(scalar1, fx, v[0]), tfn(scalar1, tx, tv[0]))


def test_create_graph_results_differentiate_like_torch():
    fx = flow.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    fv, tv = flow.tensor(Y[:, 0]), torch.tensor(Y[:, 0])
    for fn, tfn, func in ((AF.hvp, torch.autograd.functional.hvp, scalar1),
                          (AF.vjp, torch.autograd.functional.vjp, cube),
                          (AF.jvp, torch.autograd.functional.jvp, cube)):
        _, f = fn(func, fx, fv, create_graph=True)
        _, t = tfn(func, tx, tv, create_graph=True)
        assert f.requires_grad
        (gf,) = flow.autograd.grad(f.sum(), fx)
        (gt,) = torch.autograd.grad(t.sum(), tx)
        _close(gf, gt)
    h = AF.hessian(scalar1, fx, create_graph=True)
    th = torch.autograd.functional.hessian(scalar1, tx, create_graph=True)
    (gf,) = flow.autograd.grad((h * h).sum(), fx)
    (gt,) = torch.autograd.grad((th * th).sum(), tx)
    _close(gf, gt)
    # without create_graph the results are cut from the graph
    _, f = AF.vjp(scalar1, fx)
    assert not f.requires_grad
    assert fx.grad is None


def test_independent_inputs_zeros_or_strict_error():
    (fx, fy), (tx, ty) = _both(X, Y)
    _close(AF.jacobian(only_x, (fx, fy)), torch.autograd.functional.jacobian(only_x, (tx, ty)))
    v = flow.tensor(np.ones(3))
    _close(AF.vjp(only_x, (fx, fy), v),
           torch.autograd.functional.vjp(only_x, (tx, ty), torch.ones(3)))
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.vjp(only_x, (fx, fy), v, strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        AF.jacobian(only_x, (fx, fy), strict=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        AF.vjp(lambda x: flow.ones(2), fx, flow.ones(2), strict=True)


def test_errors():
    fx = flow.tensor(X)
    with pytest.raises(RuntimeError, match="v can be omitted only"):
        AF.vjp(cube, fx)
    with pytest.raises(RuntimeError, match="shape"):
        AF.vjp(cube, fx, flow.ones(4))
    with pytest.raises(TypeError, match="must return a Tensor"):
        AF.vjp(lambda x: 3.0, fx)
    with pytest.raises(RuntimeError, match="single tensor with one element"):
        AF.hessian(cube, fx)
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        AF.jacobian(cube, fx, strategy="forward-mode")
    with pytest.raises(TypeError, match="inputs must be a Tensor"):
        AF.jacobian(cube, [1.0])
