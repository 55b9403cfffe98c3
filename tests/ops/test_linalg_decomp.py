"""flow.linalg solves and decompositions (solve, solve_triangular, cholesky, qr, slogdet,
logdet) and compositions (diagonal, matrix_power, multi_dot, vecdot): values and gradients
against torch.linalg, float64 finite differences, second order, errors, inside nn.Graph."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import FnGraph, gradcheck, torch

RNG = np.random.default_rng(5)


def _pair(a):
    return flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _spd(*batch, n=4):
    m = RNG.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _backward_both(outs, touts):
    """Project every output on a fixed random tensor and run backward in both frameworks."""
    outs = outs if isinstance(outs, tuple) else (outs,)
    touts = touts if isinstance(touts, tuple) else (touts,)
    fl, tl = 0, 0
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-11)
        w = RNG.standard_normal(tuple(t.shape))
        fl = fl + (o * flow.tensor(w)).sum()
        tl = tl + (t * torch.tensor(w)).sum()
    fl.backward()
    tl.backward()


def _grads_match(*pairs):
    for f, t in pairs:
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("sa,sb,left", [((4, 4), (4, 2), True), ((2, 3, 3), (3,), True),
                                        ((2, 3, 3), (2, 3), True), ((3, 3), (2, 3, 1), True),
                                        ((1, 3, 3), (2, 3, 5), True), ((3, 3), (2, 3), False)])
def test_solve_matches_torch(sa, sb, left):
    (a, ta), (b, tb) = _pair(RNG.standard_normal(sa) + 3 * np.eye(sa[-1])), \
        _pair(RNG.standard_normal(sb))
    _backward_both(flow.linalg.solve(a, b, left=left), torch.linalg.solve(ta, tb, left=left))
    _grads_match((a, ta), (b, tb))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_matches_torch(upper, left, unit):
    (a, ta) = _pair(RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4))
    (b, tb) = _pair(RNG.standard_normal((2, 4, 3) if left else (2, 3, 4)))
    _backward_both(flow.linalg.solve_triangular(a, b, upper=upper, left=left,
                                                unitriangular=unit),
                   torch.linalg.solve_triangular(ta, tb, upper=upper, left=left,
                                                 unitriangular=unit))
    _grads_match((a, ta), (b, tb))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_torch(upper):
    a, ta = _pair(_spd(2))
    _backward_both(flow.linalg.cholesky(a, upper=upper),
                   torch.linalg.cholesky(ta, upper=upper))
    _grads_match((a, ta))
    m = _spd()
    np.testing.assert_allclose(flow.tensor(m).cholesky(upper=upper).numpy(),
                               torch.linalg.cholesky(torch.tensor(m), upper=upper).numpy(),
                               rtol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 6, 4), (2, 2, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_matches_torch(shape, mode):
    a, ta = _pair(RNG.standard_normal(shape))
    q, r = flow.linalg.qr(a, mode)
    tq, tr = torch.linalg.qr(ta, mode)
    if mode == "complete" and shape[-2] > shape[-1]:
        np.testing.assert_allclose((q @ r).numpy(), a.detach().numpy(), atol=1e-12)
        with pytest.raises(RuntimeError, match="not differentiable when mode='complete'"):
            q.sum().backward()
        return
    _backward_both((q, r), (tq, tr))
    _grads_match((a, ta))
    r_only = flow.linalg.qr(flow.tensor(a.detach().numpy()), "r")
    assert r_only[0].shape == (0,)
    np.testing.assert_allclose(np.abs(r_only[1].numpy()), np.abs(tr.detach().numpy()),
                               atol=1e-12)


@pytest.mark.timeout(30)
def test_qr_mode_r_has_no_gradient_and_bad_mode_is_named():
    a = flow.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        flow.linalg.qr(a, "r")[1].sum().backward()
    with pytest.raises(Exception, match="qr: mode must be one of"):
        flow.linalg.qr(a, "thin")


def test_slogdet_and_logdet_match_torch():
    m = RNG.standard_normal((3, 4, 4))
    m[1] = -m[1] if np.linalg.det(m[1]) > 0 else m[1]  # one negative determinant
    a, ta = _pair(m)
    _backward_both(flow.linalg.slogdet(a), torch.linalg.slogdet(ta))
    _grads_match((a, ta))
    np.testing.assert_allclose(flow.logdet(flow.tensor(m)).numpy(),
                               torch.logdet(torch.tensor(m)).numpy(), rtol=1e-12,
                               equal_nan=True)
    sign, logabs = flow.tensor(np.zeros((2, 2))).slogdet()
    assert sign.item() == 0 and logabs.item() == -np.inf


def test_gradients_against_finite_differences_and_second_order():
    spd, a = _spd(n=3), RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal((3, 2))
    gradcheck(lambda x, y: flow.linalg.solve(x, y), a, b)
    gradcheck(lambda x, y: flow.linalg.solve_triangular(x, y, upper=True), a, b)
    gradcheck(lambda x: flow.linalg.cholesky(x + x.transpose(0, 1)), spd / 2)
    gradcheck(lambda x: flow.linalg.qr(x), RNG.standard_normal((4, 3)))
    gradcheck(lambda x: flow.linalg.qr(x), RNG.standard_normal((2, 4)))
    gradcheck(lambda x: flow.linalg.slogdet(x)[1], a)
    # second order: a gradient rule made of functional ops differentiates again
    x, tx = _pair(a)
    (g,) = flow.autograd.grad(flow.linalg.solve(x, flow.tensor(b)).square().sum(), [x],
                              create_graph=True)
    (tg,) = torch.autograd.grad(torch.linalg.solve(tx, torch.tensor(b)).square().sum(), [tx],
                                create_graph=True)
    (gg,) = flow.autograd.grad(g.sum(), [x])
    (tgg,) = torch.autograd.grad(tg.sum(), [tx])
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-9)


@pytest.mark.timeout(30)
def test_float32_and_errors():
    a = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
    x = flow.linalg.solve(flow.tensor(a), flow.tensor(np.ones(3, np.float32)))
    assert x.dtype is flow.float32
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, np.ones(3)), rtol=1e-5)
    # kernel failures surface at the sync point as a KernelError naming the op
    with pytest.raises(RuntimeError, match="linalg.solve: the input of shape .* singular"):
        flow.linalg.solve(flow.zeros(3, 3), flow.ones(3, 1)).numpy()
    with pytest.raises(RuntimeError, match="linalg.cholesky: .* not positive definite"):
        flow.linalg.cholesky(-flow.eye(3)).numpy()
    with pytest.raises(ValueError, match=r"linalg.solve: incompatible shapes .*\(3, 3\)"):
        flow.linalg.solve(flow.eye(3), flow.ones(4, 2))
    with pytest.raises(ValueError, match=r"linalg.cholesky: A must be .* square .*\(2, 3\)"):
        flow.linalg.cholesky(flow.ones(2, 3))
    with pytest.raises(Exception, match="cholesky: expected a real floating point input"):
        flow.linalg.cholesky(flow.tensor(np.eye(2) + 0j))


def test_compositions_match_torch():
    a = RNG.standard_normal((2, 3, 3))
    for kw in ({}, {"offset": 1}, {"offset": -1, "dim1": 0, "dim2": 2}):
        np.testing.assert_array_equal(flow.linalg.diagonal(flow.tensor(a), **kw).numpy(),
                                      torch.linalg.diagonal(torch.tensor(a), **kw).numpy())
    for n in (0, 1, 2, 5, -1, -3):
        x, tx = _pair(a + 2 * np.eye(3))
        if n == 0:  # the identity, a new tensor
            np.testing.assert_array_equal(flow.linalg.matrix_power(x, 0).numpy(),
                                          torch.linalg.matrix_power(tx, 0).detach().numpy())
            continue
        _backward_both(flow.linalg.matrix_power(x, n), torch.linalg.matrix_power(tx, n))
        _grads_match((x, tx))
    ms = [RNG.standard_normal(s) for s in ((4,), (4, 6), (6, 2), (2, 5), (5,))]
    pairs = [_pair(m) for m in ms]
    _backward_both(flow.linalg.multi_dot([p[0] for p in pairs]),
                   torch.linalg.multi_dot([p[1] for p in pairs]))
    _grads_match(*pairs)
    u, v = RNG.standard_normal((2, 3)) + 1j, RNG.standard_normal((3,)) - 2j
    np.testing.assert_allclose(flow.linalg.vecdot(flow.tensor(u), flow.tensor(v)).numpy(),
                               torch.linalg.vecdot(torch.tensor(u), torch.tensor(v)).numpy())


def test_linalg_in_graph_matches_eager():
    a, b = flow.tensor(_spd(2, n=3)), flow.tensor(RNG.standard_normal((2, 3, 2)))

    def fn(x, y):
        q, r = flow.linalg.qr(x)
        return (flow.linalg.solve(x, y).sum() + flow.linalg.cholesky(x).sum()
                + flow.linalg.slogdet(x)[1].sum() + (q @ r).sum())

    np.testing.assert_allclose(FnGraph(fn)(a, b).numpy(), fn(a, b).numpy(), rtol=1e-12)
