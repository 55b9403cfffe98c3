"""Reductions, scans, extrema and norms: forward vs NumPy, gradients vs finite differences,
comparisons with PyTorch, tie handling and error messages.

Tie rule for max/min gradients (same as PyTorch): ``max(x, dim)`` / ``min(x, dim)`` send the
gradient to the returned index (the first of tied values); ``amax``/``amin`` and the full
reductions ``max(x)``/``min(x)`` share it evenly among all tied elements.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, to_torch, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
rng = np.random.default_rng(0)
A = rng.standard_normal((2, 3, 4))

DIMS = [None, 0, -1, (0, 2), [1, -1], (), (-3, 1, 2)]


def np_dim(dim, ndim=3):
    """NumPy's ``axis`` for a PyTorch ``dim`` (an empty tuple reduces every dim)."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return None
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def t(a):
    return flow.tensor(a)


# ---- forward vs NumPy ---------------------------------------------------------------------------

@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name,ref", [
    ("sum", np.sum), ("mean", np.mean), ("amax", np.max), ("amin", np.min),
    ("var", lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=1)),
    ("std", lambda a, axis, keepdims: np.std(a, axis=axis, keepdims=keepdims, ddof=1)),
    ("logsumexp", lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis,
                                                          keepdims=keepdims))),
    ("norm", lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))),
])
def test_reductions_match_numpy(name, ref, dim, keepdim):
    out = getattr(flow, name)(t(A), dim=dim, keepdim=keepdim)
    want = ref(A, axis=np_dim(dim), keepdims=keepdim)
    assert out.shape == want.shape
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    method = getattr(t(A), name)(dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(method.numpy(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod_matches_numpy(dim, keepdim):
    a = rng.uniform(0.5, 1.5, (3, 4))
    out = flow.prod(t(a), dim, keepdim=keepdim)
    want = np.prod(a, axis=dim, keepdims=keepdim)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("name,ref", [("all", np.all), ("any", np.any)])
@pytest.mark.parametrize("dim", [None, 0, (0, 1), -1])
def test_all_any_are_bool(name, ref, dim):
    a = np.array([[0, 1, 2], [3, 4, 5]])
    for x in (a, a > 2, a.astype(np.float32)):
        out = getattr(flow, name)(t(x), dim=dim, keepdim=True)
        assert out.dtype is flow.bool
        np.testing.assert_array_equal(out.numpy(), ref(x, axis=np_dim(dim, 2), keepdims=True))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scans_match_numpy(dim):
    a = rng.standard_normal((3, 4))
    np.testing.assert_allclose(flow.cumsum(t(a), dim).numpy(), np.cumsum(a, dim))
    np.testing.assert_allclose(t(a).cumprod(dim).numpy(), np.cumprod(a, dim))
    ints = flow.tensor([[1, 2], [3, 4]], dtype=flow.int32)
    assert flow.cumsum(ints, 0).dtype is flow.int64
    assert flow.cumsum(ints, 0, dtype=flow.float64).dtype is flow.float64


@pytest.mark.parametrize("dim", [0, 1, -1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_with_dim(dim, keepdim):
    for name, vref, iref in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
        res = getattr(flow, name)(t(A), dim, keepdim=keepdim)
        values, indices = res  # tuple unpacking
        assert res.values is values and res.indices is indices
        np.testing.assert_array_equal(values.numpy(), vref(A, axis=dim, keepdims=keepdim))
        np.testing.assert_array_equal(indices.numpy(), iref(A, axis=dim, keepdims=keepdim))
        assert indices.dtype is flow.int64
        method = getattr(t(A), name)(dim=dim, keepdim=keepdim)
        np.testing.assert_array_equal(method.indices.numpy(), indices.numpy())


def test_max_min_full_and_pairwise():
    x, y = t(A), t(A[::-1].copy())
    assert flow.max(x).item() == A.max() and x.min().item() == A.min()
    assert flow.max(x).shape == ()
    np.testing.assert_array_equal(flow.max(x, y).numpy(), np.maximum(A, A[::-1]))
    np.testing.assert_array_equal(x.min(y).numpy(), np.minimum(A, A[::-1]))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(dim, keepdim):
    a = np.array([[3, 1, 3], [0, 5, 5]])
    for name, ref in (("argmax", np.argmax), ("argmin", np.argmin)):
        out = getattr(flow, name)(t(a), dim=dim, keepdim=keepdim)
        want = ref(a, axis=dim, keepdims=keepdim) if dim is not None else ref(a)
        if dim is None and keepdim:
            want = np.reshape(want, (1, 1))
        assert out.dtype is flow.int64
        np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("p", [1, 2, 3, 0.5, 0, math.inf, -math.inf, "fro"])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_norm_orders(p, dim):
    a = rng.standard_normal((3, 4))
    out = flow.norm(t(a), p=p, dim=dim)
    flat = a if dim is None else a
    axis = None if dim is None else dim
    absa = np.abs(flat)
    if p == "fro" or p == 2:
        want = np.sqrt((absa ** 2).sum(axis=axis))
    elif p == 0:
        want = (absa != 0).sum(axis=axis).astype(float)
    elif p == math.inf:
        want = absa.max(axis=axis)
    elif p == -math.inf:
        want = absa.min(axis=axis)
    else:
        want = (absa ** p).sum(axis=axis) ** (1 / p)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)


def test_dtype_arguments():
    ints = flow.tensor([[1, 2], [3, 4]], dtype=flow.int32)
    assert flow.sum(ints).dtype is flow.int64 and flow.sum(ints).item() == 10
    assert flow.sum(flow.tensor([True, True, False])).item() == 2
    s = flow.sum(ints, dim=1, dtype=flow.float64)
    assert s.dtype is flow.float64 and s.tolist() == [3.0, 7.0]
    m = flow.mean(ints, dtype=flow.float64)
    assert m.dtype is flow.float64 and m.item() == 2.5
    m32 = flow.mean(t(A).float(), dtype=flow.float64)
    assert m32.dtype is flow.float64
    assert flow.prod(ints).dtype is flow.int64 and flow.prod(ints).item() == 24
    h = flow.tensor(rng.standard_normal(64), dtype=flow.float16)
    np.testing.assert_allclose(h.mean().float().item(),
                               h.numpy().astype(np.float32).mean(), rtol=2e-3)


def test_var_std_correction_forms():
    x = t(A)
    np.testing.assert_allclose(flow.var(x, 1, unbiased=False).numpy(), A.var(1))
    np.testing.assert_allclose(x.var(1, correction=0).numpy(), A.var(1))
    np.testing.assert_allclose(x.std(unbiased=True).numpy(), A.std(ddof=1))
    np.testing.assert_allclose(x.var(False).numpy(), A.var())  # positional unbiased
    np.testing.assert_allclose(x.std((0, 2), correction=2).numpy(), A.std((0, 2), ddof=2))
    v, m = flow.var_mean(x, 0)
    np.testing.assert_allclose(v.numpy(), A.var(0, ddof=1))
    np.testing.assert_allclose(m.numpy(), A.mean(0))
    s, _ = flow.std_mean(x, 0, keepdim=True)
    assert s.shape == (1, 3, 4)


def test_logsumexp_is_stable():
    a = np.array([[1000.0, 1000.0], [-1000.0, -np.inf]])
    out = flow.logsumexp(t(a), 1).numpy()
    np.testing.assert_allclose(out, [1000 + np.log(2), -1000.0])
    assert flow.logsumexp(t(np.full((2,), -np.inf)), 0).item() == -np.inf


def test_zero_dim_input():
    x = flow.tensor(2.5)
    for fn in (flow.sum, flow.mean, flow.amax):
        assert fn(x, 0).item() == 2.5 and fn(x, -1, keepdim=True).shape == ()
    assert flow.max(x, 0).indices.item() == 0
    assert flow.cumsum(x, 0).item() == 2.5
    assert flow.argmax(x).item() == 0


# ---- gradients vs finite differences ------------------------------------------------------------

@pytest.mark.parametrize("dim", [None, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "var", "std", "logsumexp", "norm", "amax",
                                  "amin"])
def test_reduction_gradients(name, dim, keepdim):
    gradcheck(lambda x: getattr(flow, name)(x, dim=dim, keepdim=keepdim), A)


@pytest.mark.parametrize("p", [1, 3, 0.5, math.inf, -math.inf])
def test_norm_gradients(p):
    gradcheck(lambda x: flow.norm(x, p=p, dim=1), A + np.sign(A) * 0.1)


@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_prod_gradients(dim, keepdim):
    a = rng.uniform(0.5, 1.5, (3, 4))
    gradcheck(lambda x: flow.prod(x, dim, keepdim=keepdim), a)
    a[1, 2] = 0.0  # an exact zero: the gradient is the product of the others
    gradcheck(lambda x: flow.prod(x, dim, keepdim=keepdim), a)
    a[1, 1] = 0.0  # two zeros in a row
    gradcheck(lambda x: flow.prod(x, dim, keepdim=keepdim), a)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scan_gradients(dim):
    a = rng.uniform(0.5, 1.5, (3, 4))
    gradcheck(lambda x: flow.cumsum(x, dim), a)
    gradcheck(lambda x: flow.cumprod(x, dim), a)
    a[1, 1] = 0.0
    a[2, 3] = 0.0
    gradcheck(lambda x: flow.cumprod(x, dim), a)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_gradients(dim, keepdim):
    gradcheck(lambda x: flow.max(x, dim, keepdim=keepdim).values, A)
    gradcheck(lambda x: flow.min(x, dim, keepdim)[0], A)
    gradcheck(lambda x: flow.max(x), A)


def test_tie_gradients():
    """max/min along a dim: all gradient to the first tied index; amax and full max(): shared
    evenly among ties."""
    a = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    x = flow.tensor(a, requires_grad=True)
    flow.max(x, 1).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [1, 0, 0]])
    x.grad = None
    x.amax(1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0.5, 0]])
    x.grad = None
    x.max().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0, 0, 0]])
    x.grad = None
    x.min(dim=0).values.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0, 0], [0, 1, 1]])


def test_norm_zero_gradient_and_double_backward():
    x = flow.zeros(3, dtype=flow.float64, requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)
    # second order through the 2-norm: with g = v / |v|, d/dv sum(g * w) is
    # w / |v| - v (v . w) / |v|^3 (row by row)
    a, w = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    v = flow.tensor(a, requires_grad=True)
    (g,) = flow.autograd.grad(v.norm(dim=1).sum(), v, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), a / np.linalg.norm(a, axis=1, keepdims=True))
    (g * flow.tensor(w)).sum().backward()
    n = np.linalg.norm(a, axis=1, keepdims=True)
    want = w / n - a * (a * w).sum(1, keepdims=True) / n ** 3
    np.testing.assert_allclose(v.grad.numpy(), want, rtol=1e-12)


# ---- comparisons with PyTorch -------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("case", [
    ("sum", {"dim": (0, 2)}), ("mean", {"dim": -1, "keepdim": True}), ("prod", {"dim": 1}),
    ("var", {"dim": 1, "unbiased": False}), ("std", {"dim": (0, 1)}), ("amax", {"dim": 2}),
    ("logsumexp", {"dim": (1, 2)}), ("norm", {"p": 3, "dim": 1}), ("norm", {"p": "fro"}),
    ("norm", {"p": math.inf, "dim": 0}), ("cumsum", {"dim": 1}), ("cumprod", {"dim": 2}),
])
def test_against_torch(case):
    name, kwargs = case
    a = A.copy()
    a[0, 1, :2] = 0.0  # zeros for prod/cumprod
    x = flow.tensor(a, requires_grad=True)
    tx = to_torch(a, requires_grad=True)
    out, tout = getattr(x, name)(**kwargs), getattr(tx, name)(**kwargs)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)
    g = rng.standard_normal(tuple(tout.shape))
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@needs_torch
def test_extrema_and_ties_against_torch():
    a = np.array([[1.0, 3.0, 3.0, -2.0], [5.0, 5.0, 0.0, 5.0]])
    for fn in (lambda v: v.max(1).values, lambda v: v.min(0)[0], lambda v: v.amin(1),
               lambda v: v.max(), lambda v: v.norm(p=math.inf, dim=1)):
        x, tx = flow.tensor(a, requires_grad=True), to_torch(a, requires_grad=True)
        fn(x).sum().backward()
        fn(tx).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert flow.max(t(a), 1).indices.tolist() == torch.max(to_torch(a), 1).indices.tolist()


@needs_torch
def test_gradient_penalty_against_torch():
    a = rng.standard_normal((3, 4))
    x, tx = flow.tensor(a, requires_grad=True), to_torch(a, requires_grad=True)
    (g,) = flow.autograd.grad((x * x * x).sum(), x, create_graph=True)
    ((g.norm(2, dim=1) - 1) * (g.norm(2, dim=1) - 1)).sum().backward()
    (tg,) = torch.autograd.grad((tx ** 3).sum(), tx, create_graph=True)
    ((tg.norm(2, dim=1) - 1) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)


@needs_torch
@pytest.mark.parametrize("name,kwargs", [
    ("std", {"dim": 1}), ("var", {"dim": 0}), ("logsumexp", {"dim": 1}), ("prod", {"dim": 1}),
    ("norm", {"dim": 1}), ("amax", {"dim": 1}), ("cumsum", {"dim": 1}),
])
def test_second_order_against_torch(name, kwargs):
    a = rng.uniform(0.5, 1.5, (3, 4))
    x, tx = flow.tensor(a, requires_grad=True), to_torch(a, requires_grad=True)
    (g,) = flow.autograd.grad((getattr(x, name)(**kwargs) ** 2).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((getattr(tx, name)(**kwargs) ** 2).sum(), tx,
                                create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10)
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9)


# ---- properties -------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.data())
def test_sum_over_any_dims_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    dims = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda d:
                              d % len(shape), max_size=len(shape)))
    keepdim = data.draw(st.booleans())
    out = flow.sum(t(a), dims, keepdim=keepdim)
    np.testing.assert_array_equal(out.numpy(), np.sum(a, axis=tuple(dims) or None,
                                                      keepdims=keepdim))


# ---- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call,words", [
    (lambda x: flow.sum(x, 3), ["sum", "dim 3", "(2, 3, 4)"]),
    (lambda x: x.mean((0, -3)), ["mean", "multiple times"]),
    (lambda x: flow.max(x, -4), ["max_dim", "out of range"]),
    (lambda x: flow.amax(flow.zeros(0, 3), 0), ["amax", "size 0"]),
    (lambda x: flow.argmax(flow.zeros(2, 0)), ["argmax", "empty"]),
    (lambda x: flow.cumsum(x, 5), ["cumsum", "out of range"]),
    (lambda x: flow.mean(flow.tensor([1, 2])), ["mean", "floating point"]),
    (lambda x: x.var(dim=1.5), ["var", "dim must be"]),
])
def test_errors_name_op_and_shape(call, words):
    with pytest.raises(OpError) as err:
        call(t(A))
    for w in words:
        assert w in str(err.value)


def test_argument_errors():
    with pytest.raises(ValueError, match="nuc"):
        flow.norm(t(A), p="nuc")
    with pytest.raises(TypeError, match="prod"):
        flow.prod(t(A), (0, 1))
    with pytest.raises(TypeError, match="either unbiased or correction"):
        flow.var(t(A), 0, unbiased=True, correction=0)
    with pytest.raises(TypeError, match="max: dim must be an int"):
        flow.max(t(A), (0, 1))


def test_cumprod_third_order_raises():
    x = flow.tensor(rng.uniform(0.5, 1.5, 4), requires_grad=True)
    (g,) = flow.autograd.grad(flow.cumprod(x, 0).sum(), x, create_graph=True)
    with pytest.raises(NotImplementedError, match="cumprod"):
        g.sum().backward()


# ---- sums over leading / trailing dims as matrix-vector products ------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim,keepdim", [(0, False), ((0, 1), True), (-1, False),
                                         ((1, 2), True), (1, False)])
def test_sum_and_mean_over_leading_or_trailing_dims(dtype, dim, keepdim):
    # (0,) / (0, 1) / (-1,) / (1, 2) take the BLAS path, (1,) NumPy's: all agree with float64
    x = rng.standard_normal((33, 17, 40)).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    ref = x.astype(np.float64).sum(axis=np_dim(dim), keepdims=keepdim)
    got = flow.sum(t(x), dim=dim, keepdim=keepdim)
    assert got.dtype == t(x).dtype and got.shape == ref.shape
    np.testing.assert_allclose(got.numpy(), ref, rtol=tol, atol=tol * 10)
    n = x.size // ref.size
    np.testing.assert_allclose(flow.mean(t(x), dim=dim, keepdim=keepdim).numpy(), ref / n,
                               rtol=tol, atol=tol)


def test_blas_sum_propagates_nan_and_inf_and_skips_other_layouts():
    from actorflow.ops._common import blas_sum
    x = np.ones((4, 3), np.float32)
    x[1, 0], x[2, 2] = np.nan, np.inf
    out = np.empty(3, np.float32)
    assert blas_sum(x, (0,), out)
    assert np.isnan(out[0]) and out[1] == 4 and out[2] == np.inf
    assert not blas_sum(np.asfortranarray(x), (0,), out)  # not C-contiguous: NumPy's sum
    assert not blas_sum(x.astype(np.float16), (0,), out.astype(np.float16))
    assert not blas_sum(x, (0, 1), np.empty((), np.float32))  # every dim: pairwise np.sum
    assert not blas_sum(np.ones((2, 2000), np.float32), (1,), np.empty(2, np.float32))
    g = flow.tensor(np.ones((5, 4), np.float32), requires_grad=True)
    flow.sum(g * 3, dim=0).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), np.full((5, 4), 3, np.float32))
