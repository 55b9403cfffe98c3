"""``flow.special``: every name of OneFlow's special.rst (and a few torch.special composites)
against ``torch.special``; the Hurwitz zeta op: values (SciPy's and the NumPy fallback), the
gradient in ``q`` (PyTorch's autograd and finite differences), the refused gradient in ``x``,
and inside nn.Graph."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.special import _zeta_numpy
from tests.helpers import FnGraph, gradcheck, torch

RNG = np.random.default_rng(3)
A = RNG.uniform(0.05, 0.95, size=(3, 5))

UNARY = ["erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "round", "digamma", "psi",
         "gammaln", "expit", "ndtr", "sinc", "logit"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_names_match_torch_special(name):
    a = np.concatenate([A, [[0.0, 0.5, 1.5, -2.5, 0.25]]])
    if name in ("erfinv", "logit"):
        a = np.clip(a, 0.01, 0.99)
    if name in ("digamma", "psi", "gammaln"):
        a = a + 0.1 + np.abs(a)
    x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = getattr(flow.special, name)(x), getattr(torch.special, name)(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    if name == "round":
        return
    g = RNG.standard_normal(a.shape)
    y.backward(flow.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_reductions_and_softmax_match_torch_special():
    x, tx = flow.tensor(A), torch.tensor(A)
    for dim in (0, 1, -1):
        np.testing.assert_allclose(flow.special.softmax(x, dim).numpy(),
                                   torch.special.softmax(tx, dim).numpy(), rtol=1e-12)
        np.testing.assert_allclose(flow.special.log_softmax(x, dim).numpy(),
                                   torch.special.log_softmax(tx, dim).numpy(), rtol=1e-12)
        for keep in (False, True):
            np.testing.assert_allclose(flow.special.logsumexp(x, dim, keep).numpy(),
                                       torch.special.logsumexp(tx, dim, keep).numpy(),
                                       rtol=1e-12)
    assert flow.special.softmax(x, 1, dtype=flow.float32).dtype is flow.float32
    np.testing.assert_allclose(flow.special.logit(x, eps=0.2).numpy(),
                               torch.special.logit(tx, eps=0.2).numpy(), rtol=1e-12)


def test_zeta_matches_torch_with_edge_values():
    s = np.array([1.5, 2.0, 3.0, 10.0, 1.0, 0.5, 2.0, 2.0, 3.0, 1.01, 4.5])
    q = np.array([0.1, 1.0, 5.0, 2.0, 1.0, 1.0, -1.0, -1.5, -1.5, 0.3, 30.0])
    want = torch.special.zeta(torch.tensor(s), torch.tensor(q)).numpy()
    got = flow.special.zeta(flow.tensor(s), flow.tensor(q))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(_zeta_numpy(s, q), want, rtol=1e-12, equal_nan=True)
    # broadcasting, numbers on either side, float32, the method
    q2 = RNG.uniform(0.2, 5, size=(2, 1))
    got = flow.zeta(flow.tensor(s[:3].astype(np.float32)), flow.tensor(q2.astype(np.float32)))
    assert got.shape == (2, 3) and got.dtype is flow.float32
    np.testing.assert_allclose(got.numpy(), torch.special.zeta(
        torch.tensor(s[:3]), torch.tensor(q2)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(flow.special.zeta(2.0, flow.tensor(q2)).numpy(),
                               torch.special.zeta(2.0, torch.tensor(q2)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(flow.tensor(s).zeta(1.0).numpy(),
                               torch.special.zeta(torch.tensor(s), 1.0).numpy(), rtol=1e-12,
                               equal_nan=True)


def test_zeta_numpy_fallback_matches_scipy_widely():
    scipy_special = pytest.importorskip("scipy.special")
    s = RNG.uniform(1.05, 30, 300)
    q = RNG.uniform(0.01, 40, 300)
    np.testing.assert_allclose(_zeta_numpy(s, q), scipy_special.zeta(s, q), rtol=1e-13)


def test_zeta_gradient_in_q_matches_torch_and_finite_differences():
    s, q = RNG.uniform(1.5, 4, (2, 3)), RNG.uniform(0.5, 3, (2, 3))
    x, fq = flow.tensor(s), flow.tensor(q, requires_grad=True)
    tq = torch.tensor(q, requires_grad=True)
    flow.special.zeta(x, fq).sum().backward()
    torch.special.zeta(torch.tensor(s), tq).sum().backward()
    np.testing.assert_allclose(fq.grad.numpy(), tq.grad.numpy(), rtol=1e-10)
    gradcheck(lambda v: flow.special.zeta(flow.tensor(s), v), q)
    gradcheck(lambda v: flow.special.zeta(2.5, v), q)
    with pytest.raises(NotImplementedError, match="zeta: the derivative with respect to"):
        flow.special.zeta(flow.tensor(s, requires_grad=True), fq).sum().backward()


def test_special_in_graph_matches_eager():
    x, q = flow.tensor(A), flow.tensor(A + 1.0)

    def fn(a, b):
        return flow.special.zeta(b + 1.0, a) + flow.special.ndtr(a) + flow.special.sinc(b)

    np.testing.assert_allclose(FnGraph(fn)(x, q).numpy(), fn(x, q).numpy(), rtol=1e-12)
