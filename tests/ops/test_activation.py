"""Unary math functions and activations: forward vs NumPy, gradients vs finite differences,
forward and backward vs PyTorch, dtypes and in-place forms."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops import activation as act_ops
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(99)


def _erf(a):
    return np.vectorize(math.erf)(a)


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _softplus(a, beta=1.0, threshold=20.0):
    return np.where(a * beta > threshold, a, np.log1p(np.exp(a * beta)) / beta)


# name -> (numpy reference, domain (low, high))
UNARY = {
    "abs": (np.abs, (-2, 2)), "sign": (np.sign, (-2, 2)), "square": (np.square, (-2, 2)),
    "floor": (np.floor, (-3, 3)), "ceil": (np.ceil, (-3, 3)), "trunc": (np.trunc, (-3, 3)),
    "round": (np.round, (-3, 3)),
    "exp": (np.exp, (-2, 2)), "exp2": (np.exp2, (-2, 2)), "expm1": (np.expm1, (-2, 2)),
    "log": (np.log, (0.2, 3)), "log2": (np.log2, (0.2, 3)), "log10": (np.log10, (0.2, 3)),
    "log1p": (np.log1p, (-0.5, 3)), "sqrt": (np.sqrt, (0.2, 3)),
    "rsqrt": (lambda a: 1 / np.sqrt(a), (0.2, 3)), "reciprocal": (np.reciprocal, (0.3, 3)),
    "sin": (np.sin, (-3, 3)), "cos": (np.cos, (-3, 3)), "tan": (np.tan, (-1.2, 1.2)),
    "asin": (np.arcsin, (-0.9, 0.9)), "acos": (np.arccos, (-0.9, 0.9)),
    "atan": (np.arctan, (-3, 3)), "sinh": (np.sinh, (-2, 2)), "cosh": (np.cosh, (-2, 2)),
    "tanh": (np.tanh, (-2, 2)), "asinh": (np.arcsinh, (-2, 2)),
    "acosh": (np.arccosh, (1.2, 3)), "atanh": (np.arctanh, (-0.9, 0.9)),
    "erf": (_erf, (-2, 2)), "erfc": (lambda a: 1 - _erf(a), (-2, 2)),
    "sigmoid": (_sigmoid, (-4, 4)), "neg": (np.negative, (-2, 2)),
    "relu": (lambda a: np.maximum(a, 0), (-2, 2)),
}
ROUNDING = {"sign", "floor", "ceil", "trunc", "round"}

# name -> (kwargs, numpy reference)
ACTIVATIONS = {
    "gelu": ({}, lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2)))),
    "gelu_tanh": ({"approximate": "tanh"}, lambda a: 0.5 * a * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))),
    "silu": ({}, lambda a: a * _sigmoid(a)),
    "mish": ({}, lambda a: a * np.tanh(_softplus(a))),
    "leaky_relu": ({"negative_slope": 0.2}, lambda a: np.where(a > 0, a, 0.2 * a)),
    "elu": ({"alpha": 0.7}, lambda a: np.where(a > 0, a, 0.7 * np.expm1(a))),
    "selu": ({}, lambda a: act_ops.SELU_SCALE * np.where(a > 0, a, act_ops.SELU_ALPHA
                                                          * np.expm1(a))),
    "celu": ({"alpha": 0.5}, lambda a: np.maximum(a, 0) + np.minimum(0, 0.5 * np.expm1(a / 0.5))),
    "softplus": ({"beta": 2.0, "threshold": 3.0}, lambda a: _softplus(a, 2.0, 3.0)),
    "hardtanh": ({"min_val": -0.5, "max_val": 1.5}, lambda a: np.clip(a, -0.5, 1.5)),
    "relu6": ({}, lambda a: np.clip(a, 0, 6)),
    "threshold": ({"threshold": 0.3, "value": -2.0}, lambda a: np.where(a > 0.3, a, -2.0)),
    "hardsigmoid": ({}, lambda a: np.clip(a / 6 + 0.5, 0, 1)),
    "hardswish": ({}, lambda a: a * np.clip(a / 6 + 0.5, 0, 1)),
    "softsign": ({}, lambda a: a / (1 + np.abs(a))),
    "logsigmoid": ({}, lambda a: np.log(_sigmoid(a))),
    "hardshrink": ({"lambd": 0.7}, lambda a: np.where(np.abs(a) > 0.7, a, 0.0)),
    "softshrink": ({"lambd": 0.7}, lambda a: np.where(np.abs(a) > 0.7, a - np.sign(a) * 0.7, 0)),
}


def _act(name):
    kwargs, ref = ACTIVATIONS[name]
    fn = getattr(flow, "gelu" if name == "gelu_tanh" else name)
    return (lambda x: fn(x, **kwargs)), ref, kwargs


def _sample(low, high, shape=(3, 4), avoid=()):
    """Uniform samples kept away from kinks (``avoid``) so finite differences are smooth."""
    a = RNG.uniform(low, high, size=shape)
    for k in avoid:
        a = np.where(np.abs(a - k) < 0.05, k + 0.1, a)
    return a


def _kinks(name):
    return {"relu": (0,), "abs": (0,), "leaky_relu": (0,), "elu": (0,), "selu": (0,),
            "celu": (0,), "hardtanh": (-0.5, 1.5), "relu6": (0, 6), "threshold": (0.3,),
            "hardsigmoid": (-3, 3), "hardswish": (-3, 3), "softplus": (1.5,),
            "hardshrink": (-0.7, 0.7), "softshrink": (-0.7, 0.7)}.get(name, ())


# ---- forward ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_forward_matches_numpy(name, dtype):
    ref, (low, high) = UNARY[name]
    a = RNG.uniform(low, high, size=(3, 4)).astype(dtype)
    if name == "round":
        a[0, :3] = [0.5, 1.5, -2.5]  # halves round to even
    got = getattr(flow, name)(flow.tensor(a))
    assert got.dtype is flow.tensor(a).dtype
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), ref(a.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward_matches_numpy(name, dtype):
    fn, ref, _ = _act(name)
    a = RNG.uniform(-5, 5, size=(3, 5)).astype(dtype)
    got = fn(flow.tensor(a))
    assert got.dtype is flow.tensor(a).dtype
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), ref(a.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sigmoid", "sin", "tanh", "erf", "rsqrt",
                                  "reciprocal", "expm1", "log1p", "atan"])
def test_integer_input_gives_default_float(name):
    x = flow.tensor([1, 2, 3])
    out = getattr(flow, name)(x)
    assert out.dtype is flow.float32
    ref, _ = UNARY[name]
    np.testing.assert_allclose(out.numpy(), ref(np.array([1.0, 2.0, 3.0])), rtol=1e-6)
    flow.set_default_dtype(flow.float64)
    try:
        assert getattr(flow, name)(x).dtype is flow.float64
    finally:
        flow.set_default_dtype(flow.float32)
    assert flow.gelu(x).dtype is flow.float32


def test_integer_preserving_functions():
    x = flow.tensor([-3, 0, 4])
    for name, want in (("abs", [3, 0, 4]), ("sign", [-1, 0, 1]), ("square", [9, 0, 16]),
                       ("floor", [-3, 0, 4]), ("neg", [3, 0, -4]), ("relu", [0, 0, 4])):
        out = getattr(flow, name)(x)
        assert out.dtype is flow.int64 and out.tolist() == want, name
    assert flow.relu6(flow.tensor([-1, 3, 9])).tolist() == [0, 3, 6]


def test_tests_and_nan_to_num():
    a = flow.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert flow.isnan(a).tolist() == [False, True, False, False]
    assert flow.isinf(a).tolist() == [False, False, True, True]
    assert a.isfinite().tolist() == [True, False, False, False]
    assert flow.isnan(flow.tensor([1, 2])).tolist() == [False, False]
    big = np.finfo(np.float32).max
    np.testing.assert_array_equal(flow.nan_to_num(a).numpy(), [1.0, 0.0, big, -big])
    assert flow.nan_to_num(a, nan=2.0, posinf=9.0, neginf=-9.0).tolist() == [1, 2, 9, -9]
    h = flow.tensor([float("inf")], dtype=flow.float16)
    assert flow.nan_to_num(h).tolist() == [65504.0]
    a.nan_to_num_(nan=-1.0)
    assert a.tolist()[:2] == [1.0, -1.0]
    assert flow.round(flow.tensor([1.2345, -2.5551]), decimals=2).tolist() == \
        pytest.approx([1.23, -2.56])


def test_half_precision_inputs():
    a = RNG.uniform(-3, 3, size=(4,))
    for d in (flow.float16, flow.bfloat16):
        x = flow.tensor(a, dtype=d)
        for name in ("sigmoid", "gelu", "silu", "erf", "exp", "tanh", "softplus"):
            out = getattr(flow, name)(x)
            assert out.dtype is d, name
            want = getattr(torch, name)(torch.tensor(a)) if name not in ("gelu", "silu",
                                                                          "softplus") \
                else getattr(torch.nn.functional, name)(torch.tensor(a))
            np.testing.assert_allclose(out.float().numpy(), want.numpy(), rtol=2e-2, atol=2e-2)


def test_erf_without_scipy_matches():
    a = np.linspace(-6, 6, 101)
    slow = act_ops.math_array_fn("erf")(a)
    np.testing.assert_allclose(slow, act_ops.erf_array(a), rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(act_ops.math_array_fn("erfc")(a), act_ops.erfc_array(a),
                               rtol=1e-13)


def test_sigmoid_and_softplus_are_stable():
    x = flow.tensor([-1000.0, -30.0, 0.0, 30.0, 1000.0], dtype=flow.float64)
    np.testing.assert_allclose(flow.sigmoid(x).numpy(),
                               [0.0, _sigmoid(-30.0), 0.5, _sigmoid(30.0), 1.0], rtol=1e-14)
    sp = flow.softplus(x, threshold=1e6).numpy()
    assert np.isfinite(sp).all() and sp[-1] == 1000.0
    assert np.isfinite(flow.logsigmoid(x).numpy()).all()
    assert np.isfinite(flow.silu(x).numpy()).all()
    assert np.isfinite(flow.mish(x).numpy()).all()


def test_argument_validation():
    x = flow.ones(2)
    with pytest.raises(ValueError, match="gelu: approximate"):
        flow.gelu(x, approximate="fast")
    with pytest.raises(ValueError, match="hardtanh"):
        flow.hardtanh(x, 1.0, -1.0)
    with pytest.raises(ValueError, match="softshrink"):
        flow.softshrink(x, -1.0)
    with pytest.raises(ValueError, match="celu"):
        flow.celu(x, 0.0)


# ---- gradients vs finite differences ------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(set(UNARY) - ROUNDING))
def test_unary_gradcheck(name):
    _, (low, high) = UNARY[name]
    gradcheck(getattr(flow, name), _sample(low, high, (2, 3), _kinks(name)))


@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_gradients_are_zero(name):
    x = flow.tensor(_sample(-3, 3, (2, 3)), requires_grad=True)
    getattr(flow, name)(x).sum().backward()
    assert x.grad is not None and not x.grad.numpy().any()


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradcheck(name):
    fn, _, _ = _act(name)
    gradcheck(fn, _sample(-4, 4, (2, 4), _kinks(name)))


def test_second_derivatives():
    # gradient rules are functional ops, so they differentiate again
    for fn, d2 in ((flow.tanh, lambda a: -2 * np.tanh(a) * (1 - np.tanh(a) ** 2)),
                   (flow.sigmoid, lambda a: _sigmoid(a) * (1 - _sigmoid(a))
                    * (1 - 2 * _sigmoid(a))),
                   (flow.sin, lambda a: -np.sin(a)),
                   (flow.gelu, lambda a: np.exp(-a * a / 2) / np.sqrt(2 * np.pi) * (2 - a * a))):
        a = _sample(-2, 2, (5,))
        x = flow.tensor(a, requires_grad=True)
        (g,) = flow.autograd.grad(fn(x).sum(), x, create_graph=True)
        g.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), d2(a), rtol=1e-10, atol=1e-12)


def test_relu_second_derivative_reaches_the_input_with_zeros_as_torch():
    """grad(dx, [x, dy]) of relu's dx = relu'(x) * dy: zeros for x (reached through the mask,
    as PyTorch), the mask for dy."""
    a, u, v = _sample(-1, 1, (6,)), RNG.random(6), RNG.random(6)
    x, gy = flow.tensor(a, requires_grad=True), flow.tensor(u, requires_grad=True)
    (dx,) = flow.autograd.grad(flow.relu(x), x, gy, create_graph=True)
    ddx, ddy = flow.autograd.grad(dx, [x, gy], flow.tensor(v))
    tx, tg = to_torch(a, requires_grad=True), to_torch(u, requires_grad=True)
    (tdx,) = torch.autograd.grad(torch.relu(tx), tx, tg, create_graph=True)
    tddx, tddy = torch.autograd.grad(tdx, [tx, tg], to_torch(v))
    np.testing.assert_array_equal(ddx.numpy(), tddx.numpy())
    np.testing.assert_array_equal(ddy.numpy(), tddy.numpy())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_grad_gradcheck_twice(approximate):
    a = _sample(-2, 2, (4,))

    def first_grad(x):
        if not x.requires_grad:  # the finite-difference evaluations pass plain tensors
            x = x.detach().requires_grad_()
        with flow.enable_grad():
            (g,) = flow.autograd.grad(flow.gelu(x, approximate=approximate).sum(), x,
                                      create_graph=True)
        return g

    gradcheck(first_grad, a)


def test_gelu_saves_phi_while_recording_and_only_phi():
    """Exact float32/64 gelu outputs Phi(x) for its backward while autograd records; the node
    keeps that output and the input, not y, so y may change in place before backward."""
    a = _sample(-3, 3, (6,))
    x = flow.tensor(a, requires_grad=True)
    y = flow.gelu(x)
    node = y.grad_fn
    assert node.attrs["save_cdf"] and node._outputs[0] is None
    np.testing.assert_allclose(node._outputs[1].numpy(), 0.5 * (1 + _erf(a / np.sqrt(2))),
                               rtol=1e-14)
    y.mul_(3.0)  # PyTorch allows this: gelu's backward does not read its output
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (0.5 * (1 + _erf(a / np.sqrt(2))) + a * np.exp(
        -a * a / 2) / np.sqrt(2 * np.pi)), rtol=1e-12)
    assert not flow.gelu(x, approximate="tanh").grad_fn.attrs["save_cdf"]
    assert not flow.gelu(x.half().detach().requires_grad_()).grad_fn.attrs["save_cdf"]
    with flow.no_grad():
        assert flow.gelu(x).grad_fn is None
    with pytest.raises(Exception, match="gelu: save_cdf is only for the exact form"):
        flow.dispatch.apply(flow.ops.registry.get("gelu"), [x.detach()],
                            {"approximate": "tanh", "save_cdf": True})


# ---- vs PyTorch ---------------------------------------------------------------------------------

@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_vs_torch(name):
    fn, _, kwargs = _act(name)
    tname = "gelu" if name == "gelu_tanh" else name
    a = RNG.uniform(-5, 5, size=(3, 4))
    a[0, :4] = [0.0, -3.0, 3.0, 6.0]  # kinks: the subgradient conventions must agree
    g = RNG.standard_normal((3, 4))
    x, tx = flow.tensor(a, requires_grad=True), to_torch(a, True)
    out = fn(x)
    tout = getattr(torch.nn.functional, tname)(tx, **kwargs)
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    # PyTorch's hardsigmoid backward multiplies by 1/6 rounded to float32
    rtol = 1e-7 if name == "hardsigmoid" else 1e-10
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=1e-12)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", ["abs", "sqrt", "log", "sigmoid", "tanh", "erf", "rsqrt",
                                  "reciprocal", "asin", "atanh", "expm1", "exp2"])
def test_unary_vs_torch(name):
    _, (low, high) = UNARY[name]
    a = RNG.uniform(low, high, size=(3, 4)).astype(np.float32)
    x, tx = flow.tensor(a, requires_grad=True), to_torch(a, True)
    out, tout = getattr(flow, name)(x), getattr(torch, name)(tx)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=2e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-5, atol=1e-6)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_float32_kernels_vs_torch(approximate):
    # the float32 kernels work in blocks: use more than one, a transposed (strided) input and
    # the edges: signed zeros, tiny and huge |x|, infinities, nan
    edges = [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 5.5, -5.5, 13.0, -13.0, 1e4, -1e4,
             np.inf, -np.inf, np.nan]
    a = np.concatenate([RNG.standard_normal(150_000) * 3, np.linspace(-20, 20, 4001),
                        edges, np.zeros(4)]).astype(np.float32).reshape(-1, 4).T
    g = RNG.standard_normal(a.shape).astype(np.float32)
    x = flow.tensor(a, requires_grad=True)
    tx = torch.tensor(a.astype(np.float64), requires_grad=True)  # PyTorch in float64: the truth
    out = flow.gelu(x.t(), approximate=approximate)
    tout = torch.nn.functional.gelu(tx.t(), approximate=approximate)
    out.backward(flow.tensor(g.T))
    tout.backward(torch.tensor(g.T.astype(np.float64)))
    assert out.dtype is flow.float32 and x.grad.dtype is flow.float32
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=3e-7, atol=2e-7)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernels_may_write_over_their_inputs(approximate):
    """Fused programs run elementwise kernels in place; the blocked float32 kernels too."""
    gelu, gelu_grad = (flow.ops.registry.get(n).kernel_cpu for n in ("gelu", "gelu_grad"))
    attrs = {"approximate": approximate}
    x = (RNG.standard_normal(300_001) * 3).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    y, d = np.empty_like(x), np.empty_like(x)
    gelu([x], [y], attrs)
    gelu_grad([g, x], [d], attrs)
    for ins, which, want in (([x.copy()], 0, y), ([g, x.copy()], 1, d),
                             ([g.copy(), x], 0, d)):
        kernel = gelu if len(ins) == 1 else gelu_grad
        kernel(ins, [ins[which]], attrs)
        np.testing.assert_array_equal(ins[which], want)
    if approximate == "tanh":
        return
    # with the saved Phi(x): y is the same bits, the gradient within float32 rounding
    y2, phi, d2 = np.empty_like(x), np.empty_like(x), np.empty_like(x)
    gelu([x], [y2, phi], {**attrs, "save_cdf": True})
    np.testing.assert_array_equal(y2, y)
    gelu_grad([g, x, phi], [d2], attrs)
    np.testing.assert_allclose(d2, d, rtol=2e-6, atol=1e-6)
    for which in range(3):
        ins = [g.copy(), x.copy(), phi.copy()]
        gelu_grad(ins, [ins[which]], attrs)
        np.testing.assert_array_equal(ins[which], d2)


# ---- in-place forms --------------------------------------------------------------------------

def test_inplace_unary_methods():
    for name in ("abs_", "sqrt_", "exp_", "log_", "sin_", "tanh_", "sigmoid_", "floor_",
                 "round_", "reciprocal_", "erf_", "square_", "neg_", "relu_"):
        a = RNG.uniform(0.5, 2.0, size=(3,))
        x = flow.tensor(a)
        r = getattr(x, name)()
        assert r is x and x._version == 1, name
        np.testing.assert_allclose(x.numpy(), getattr(flow, name[:-1])(flow.tensor(a)).numpy())


def test_inplace_activations():
    a = RNG.uniform(-2, 2, size=(6,))
    for fn, kwargs in ((flow.leaky_relu, {}), (flow.elu, {}), (flow.hardtanh, {}),
                       (flow.relu6, {}), (flow.silu, {}), (flow.hardswish, {}),
                       (flow.threshold, {"threshold": 0.1, "value": 0.0})):
        x = flow.tensor(a)
        out = fn(x, inplace=True, **kwargs)
        assert out is x and x._version == 1
        np.testing.assert_allclose(x.numpy(), fn(flow.tensor(a), **kwargs).numpy())


def test_inplace_unary_gradients():
    # sin_ and log_ read their input in backward: the dispatcher keeps the pre-op values
    a = _sample(0.5, 2.0, (2, 3))

    def chain(x):
        z = x * 2
        z.sin_()
        z.add_(2)
        z.log_()
        z.sqrt_()
        return z

    gradcheck(chain, a)
