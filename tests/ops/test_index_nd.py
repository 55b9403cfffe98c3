"""Gather/scatter edge cases, OneFlow's batch_gather / tensor_scatter_nd_update /
reduce_sum_like, distances (cosine_similarity, pairwise_distance) and the framework behaviours
OneFlow's tests of these ops rely on: gradients of gradients with respect to the seed,
deepcopy of a computed tensor, an optimizer over a parameterless module."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
rng = np.random.default_rng(0)


def t(a, **kw):
    return flow.tensor(a, **kw)


# ---- gather / scatter mixing 0-d and 1-d ------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("xs,index", [((1,), 0), ((), 0), ((), [0]), ((3,), [2, 0])])
def test_gather_mixes_0d_and_1d_like_torch(xs, index):
    a = rng.standard_normal(xs)
    x = t(a, requires_grad=True)
    out = flow.gather(x, 0, t(np.array(index)))
    tx = torch.tensor(a, requires_grad=True)
    ref = torch.gather(tx, 0, torch.tensor(np.array(index)))
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_scatter_0d_index_and_gradient():
    src = rng.standard_normal(3)
    gradcheck(lambda s: flow.scatter(flow.zeros(4, dtype=flow.float64), 0, t(np.array(2)), s),
              src)


@needs_torch
def test_scatter_multiply_matches_torch():
    a, s = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    idx = np.array([[0, 1, 2, 0], [0, 2, 1, 0]])
    ours = flow.scatter(t(a), 0, t(idx), t(s), reduce="multiply")
    ref = torch.tensor(a).scatter(0, torch.tensor(idx), torch.tensor(s), reduce="multiply")
    np.testing.assert_allclose(ours.numpy(), ref.numpy())
    x = t(a, requires_grad=True)
    with pytest.raises(NotImplementedError, match="reduce='multiply'"):
        flow.scatter(x, 0, t(idx), t(s), reduce="multiply").sum().backward()


# ---- batch_gather / tensor_scatter_nd_update / reduce_sum_like --------------------------------

@pytest.mark.parametrize("shape,ishape", [((3, 2, 2), (3,)), ((4, 2), (4,)),
                                          ((2, 3, 4), (2, 5)), ((2, 3, 4, 2), (2, 3, 2))])
def test_batch_gather_matches_numpy(shape, ishape):
    a = rng.standard_normal(shape)
    b = len(ishape) - 1
    idx = rng.integers(0, shape[b], ishape)
    out = flow.batch_gather(t(a), t(idx))
    expanded = idx.reshape(ishape + (1,) * (len(shape) - b - 1))
    want = np.take_along_axis(a, np.broadcast_to(expanded, ishape + shape[b + 1:]), axis=b)
    np.testing.assert_array_equal(out.numpy(), want)
    gradcheck(lambda x: flow.batch_gather(x, t(idx)), a)


def test_batch_gather_errors():
    with pytest.raises(IndexError, match="batch_gather: the leading"):
        flow.batch_gather(t(np.zeros((2, 3))), t(np.zeros((3, 1), np.int64)))
    with pytest.raises(IndexError, match="batch_gather: index 5 is out of range"):
        flow.batch_gather(t(np.zeros((2, 3))), t(np.array([5, 0])))


def test_tensor_scatter_nd_update_values_and_gradients():
    a = np.arange(15.0).reshape(5, 3)
    idx = np.array([[0], [4], [2]], np.int32)
    upd = rng.standard_normal((3, 3))
    want = a.copy()
    want[idx[:, 0]] = upd
    np.testing.assert_array_equal(flow.tensor_scatter_nd_update(t(a), t(idx), t(upd)).numpy(),
                                  want)
    elem = np.array([[0, 0], [1, 2], [4, 1]])
    gradcheck(lambda x, u: flow.tensor_scatter_nd_update(x, t(elem), u), a,
              rng.standard_normal(3))
    x = t(a.copy())
    assert flow.tensor_scatter_nd_update(x, t(idx), t(upd), inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), want)
    with pytest.raises(ValueError, match="updates must have shape \\(3, 3\\)"):
        flow.tensor_scatter_nd_update(t(a), t(idx), t(np.zeros(3)))


@pytest.mark.parametrize("shape,like,axis", [((3, 3, 3), (3, 1, 1), (1, 2)),
                                             ((1, 5, 6, 1, 6), (1, 5, 6), (3, 4)),
                                             ((2, 3, 4), (3, 1), (0, 2))])
def test_reduce_sum_like(shape, like, axis):
    a = rng.standard_normal(shape)
    out = flow._C.reduce_sum_like(t(a), t(np.zeros(like)), axis=axis)
    np.testing.assert_allclose(out.numpy(), a.sum(axis=axis).reshape(like))
    gradcheck(lambda x: flow._C.reduce_sum_like(x, t(np.zeros(like)), axis=axis), a)
    with pytest.raises(ValueError, match="reduce_sum_like"):
        flow._C.reduce_sum_like(t(a), t(np.zeros((7,))), axis=axis)


def test_mean_of_0d_over_dim_minus_1():
    x = t(np.float64(2.5), requires_grad=True)
    y = x.mean(-1)
    assert y.shape == () and y.item() == 2.5
    y.backward()
    assert x.grad.item() == 1.0


# ---- distances ----------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("s1,s2,dim", [((10, 16), (10, 16), 1), ((10, 16), (4, 10, 16), -1),
                                       ((16,), (16,), 0)])
def test_cosine_similarity_matches_torch(s1, s2, dim):
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    ours = flow.nn.functional.cosine_similarity(t(a), t(b), dim=dim, eps=1e-6)
    ref = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b), dim, 1e-6)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    mod = flow.nn.CosineSimilarity(dim=dim, eps=1e-6)
    np.testing.assert_allclose(mod(t(a), t(b)).numpy(), ref.numpy(), rtol=1e-12)
    gradcheck(lambda x, y: flow.nn.functional.cosine_similarity(x, y, dim), a, b)


@needs_torch
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("s1,s2", [((10, 16), (10, 16)), ((16,), (10, 16)), ((16,), (16,))])
def test_pairwise_distance_matches_torch(p, s1, s2):
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    for keepdim in (False, True):
        ours = flow.nn.functional.pairwise_distance(t(a), t(b), p=p, keepdim=keepdim)
        ref = torch.nn.functional.pairwise_distance(torch.tensor(a), torch.tensor(b), p=p,
                                                    keepdim=keepdim)
        assert ours.shape == tuple(ref.shape)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    mod = flow.nn.PairwiseDistance(p=p)
    np.testing.assert_allclose(mod(t(a), t(b)).numpy(),
                               torch.nn.PairwiseDistance(p=p)(torch.tensor(a),
                                                              torch.tensor(b)).numpy())
    gradcheck(lambda x, y: flow.nn.functional.pairwise_distance(x, y, p=p), a, b)


@needs_torch
@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
def test_cdist_matches_torch(p):
    a, b = rng.standard_normal((2, 5, 3)), rng.standard_normal((4, 3))
    ours = flow.cdist(t(a), t(b), p)
    ref = torch.cdist(torch.tensor(a), torch.tensor(b), p)
    assert ours.shape == (2, 5, 4)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    if p not in (0.0, float("inf")):
        gradcheck(lambda x, y: flow.cdist(x, y, p), a[0], b)


def test_cdist_gradient_is_zero_at_zero_distance():
    x = t(np.ones((2, 3)), requires_grad=True)
    flow.cdist(x, t(np.ones((1, 3)))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


@needs_torch
@pytest.mark.parametrize("xs,ishape,dim", [((3, 4), (1, 2), 1), ((3, 4), (2, 4), 0),
                                           ((2, 3, 4), (2, 5), None), ((2, 1, 4), (1, 3, 2), 2)])
def test_take_along_dim_matches_torch(xs, ishape, dim):
    a = rng.standard_normal(xs)
    n = int(np.prod(xs)) if dim is None else xs[dim]
    idx = rng.integers(0, n, ishape)
    ours = flow.take_along_dim(t(a), t(idx), dim)
    ref = torch.take_along_dim(torch.tensor(a), torch.tensor(idx), dim)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    gradcheck(lambda x: x.take_along_dim(t(idx), dim), a)


# ---- framework behaviours -----------------------------------------------------------------------

@needs_torch
def test_grad_of_grad_with_respect_to_the_seed():
    a, g, gg = rng.standard_normal((4, 5)), rng.standard_normal((2, 3)), rng.standard_normal(
        (4, 5))
    x, seed = t(a, requires_grad=True), t(g, requires_grad=True)
    dx = flow.autograd.grad(x[1:3, 0:5:2], x, seed, create_graph=True)[0]
    assert dx.requires_grad
    dseed = flow.autograd.grad(dx, seed, t(gg))[0]
    tx, tseed = torch.tensor(a, requires_grad=True), torch.tensor(g, requires_grad=True)
    tdx = torch.autograd.grad(tx[1:3, 0:5:2], tx, tseed, create_graph=True)[0]
    tdseed = torch.autograd.grad(tdx, tseed, torch.tensor(gg))[0]
    np.testing.assert_array_equal(dseed.numpy(), tdseed.numpy())

    gy = t(rng.standard_normal((4, 5)), requires_grad=True)
    tgy = torch.tensor(gy.numpy(), requires_grad=True)
    for fn, tfn in [(flow.softmax, torch.softmax), (flow.log_softmax, torch.log_softmax)]:
        dx = flow.autograd.grad(fn(x, 1), x, gy, create_graph=True)[0]
        ddx, dgy = flow.autograd.grad(dx, [x, gy], t(gg))
        tdx = torch.autograd.grad(tfn(tx, 1), tx, tgy, create_graph=True)[0]
        tddx, tdgy = torch.autograd.grad(tdx, [tx, tgy], torch.tensor(gg))
        np.testing.assert_allclose(ddx.numpy(), tddx.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dgy.numpy(), tdgy.numpy(), rtol=1e-10, atol=1e-12)


def test_deepcopy_of_a_computed_tensor_is_a_plain_tensor():
    x = t(np.ones(3), requires_grad=True)
    y = copy.deepcopy(x * 2)
    assert not y.requires_grad and y.grad_fn is None
    y.masked_fill_(t(np.array([True, False, True])), 0.0)  # in place is allowed on it
    np.testing.assert_array_equal(y.numpy(), [0, 2, 0])
    assert copy.deepcopy(x).requires_grad  # a leaf keeps requires_grad


def test_optimizer_over_a_parameterless_module():
    opt = flow.optim.SGD(flow.nn.ReLU().parameters(), lr=0.1)
    assert opt.param_groups[0]["params"] == []
    opt.step()
    with pytest.raises(ValueError, match="empty parameter list"):
        flow.optim.SGD([])
