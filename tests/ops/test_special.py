"""Special functions (erfinv, lgamma, digamma, polygamma, logaddexp), the composite pointwise ops
(addcmul, addcdiv, quick_gelu, square_relu, prelu, glu, ...), broadcasting helpers, the extra
activation layers, and double backward through a grad_output: forward vs PyTorch, gradients vs
finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, torch

RNG = np.random.default_rng(7)


def _t(a):
    return torch.tensor(np.asarray(a))


# ---- special functions -----------------------------------------------------------------------

SPECIAL = {  # name -> (domain, torch reference)
    "erfinv": ((-0.95, 0.95), torch.erfinv),
    "lgamma": ((0.2, 4.0), torch.lgamma),
    "digamma": ((0.2, 4.0), torch.digamma),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_forward_matches_torch(name, dtype):
    (low, high), ref = SPECIAL[name]
    a = RNG.uniform(low, high, size=(3, 4)).astype(dtype)
    got = getattr(flow, name)(flow.tensor(a))
    assert got.dtype is flow.tensor(a).dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), ref(_t(a)).numpy(), rtol=tol, atol=tol)
    # as a Tensor method, and from an integer tensor (default float result)
    np.testing.assert_allclose(getattr(flow.tensor(a), name)().numpy(), got.numpy())
    assert getattr(flow, name)(flow.tensor([1, 2])).dtype is flow.float32


def test_special_edge_values_match_torch():
    a = np.array([0.0, -1.0, -2.5, 1.0, 1e-3, 30.0])
    for name in ("lgamma", "digamma"):
        np.testing.assert_allclose(getattr(flow, name)(flow.tensor(a)).numpy(),
                                   getattr(torch, name)(_t(a)).numpy(), rtol=1e-12,
                                   equal_nan=True)
    e = np.array([-1.0, 1.0, 2.0, 0.0])
    np.testing.assert_array_equal(flow.erfinv(flow.tensor(e)).numpy(),
                                  torch.erfinv(_t(e)).numpy())


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_matches_torch(n):
    a = RNG.uniform(0.3, 4.0, size=(5,))
    np.testing.assert_allclose(flow.polygamma(n, flow.tensor(a)).numpy(),
                               torch.polygamma(n, _t(a)).numpy(), rtol=1e-8)
    np.testing.assert_allclose(flow.tensor(a).polygamma(n).numpy(),
                               torch.polygamma(n, _t(a)).numpy(), rtol=1e-8)
    with pytest.raises(Exception, match="polygamma"):
        flow.polygamma(-1, flow.tensor(a))


@pytest.mark.parametrize("name,low,high", [("erfinv", -0.9, 0.9), ("lgamma", 0.3, 3.0),
                                           ("digamma", 0.3, 3.0)])
def test_special_gradients(name, low, high):
    gradcheck(getattr(flow, name), RNG.uniform(low, high, size=(2, 3)))


def test_special_double_backward():
    for name in ("lgamma", "digamma", "erfinv"):
        a = RNG.uniform(0.3, 0.9, size=(4,))
        x = flow.tensor(a, requires_grad=True)
        (g,) = flow.autograd.grad(getattr(flow, name)(x).sum(), x, create_graph=True)
        (gg,) = flow.autograd.grad(g.sum(), x)
        tx = _t(a).requires_grad_()
        (tg,) = torch.autograd.grad(getattr(torch, name)(tx).sum(), tx, create_graph=True)
        (tgg,) = torch.autograd.grad(tg.sum(), tx)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-9, err_msg=name)


def test_logaddexp_forward_and_gradients():
    a, b = RNG.uniform(-3, 3, size=(3, 4)), RNG.uniform(-3, 3, size=(4,))
    for name in ("logaddexp", "logaddexp2"):
        got = getattr(flow, name)(flow.tensor(a), flow.tensor(b))
        np.testing.assert_allclose(got.numpy(), getattr(torch, name)(_t(a), _t(b)).numpy(),
                                   rtol=1e-12)
        gradcheck(getattr(flow, name), a, b)
        gradcheck(lambda x, n=name: getattr(flow, n)(x, 0.5), a)
        np.testing.assert_allclose(getattr(flow.tensor(a), name)(flow.tensor(b)).numpy(),
                                   got.numpy())
    inf = np.array([-np.inf, np.inf, 1e3])
    np.testing.assert_array_equal(flow.logaddexp(flow.tensor(inf), flow.tensor(inf)).numpy(),
                                  torch.logaddexp(_t(inf), _t(inf)).numpy())
    assert flow.logaddexp(flow.tensor([1, 2]), flow.tensor([3, 4])).dtype is flow.float32


# ---- composites -------------------------------------------------------------------------------

def test_addcmul_addcdiv():
    x, y, z = (RNG.uniform(0.5, 2, size=s) for s in ((2, 3), (3,), (2, 1)))
    for name in ("addcmul", "addcdiv"):
        got = getattr(flow, name)(flow.tensor(x), flow.tensor(y), flow.tensor(z), value=0.7)
        want = getattr(torch, name)(_t(x), _t(y), _t(z), value=0.7)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        gradcheck(lambda a, b, c, n=name: getattr(flow, n)(a, b, c, value=3), x, y, z)
        t = flow.tensor(x)
        getattr(t, name + "_")(flow.tensor(y), flow.tensor(z), value=0.7)
        np.testing.assert_allclose(t.numpy(), want.numpy(), rtol=1e-12)
        with pytest.raises(Exception, match="add_"):
            getattr(flow.tensor(y), name + "_")(flow.tensor(x), flow.tensor(z))


def test_composite_activations_match_torch():
    a = RNG.uniform(-3, 3, size=(2, 6))
    x, tx = flow.tensor(a), _t(a)
    F, tF = flow.nn.functional, torch.nn.functional
    cases = [
        (flow._C.quick_gelu(x), tx * torch.sigmoid(1.702 * tx)),
        (flow._C.square_relu(x), torch.relu(tx) ** 2),
        (flow._C.gelu_with_approximate(x, "tanh"), tF.gelu(tx, approximate="tanh")),
        (flow._C.fast_gelu(x), tF.gelu(tx, approximate="tanh")),
        (F.tanhshrink(x), tF.tanhshrink(tx)),
        (F.glu(x), tF.glu(tx)),
        (F.glu(x, 0), tF.glu(tx, 0)),
        (F.softmin(x, 1), tF.softmin(tx, 1)),
        (flow._C.fused_fast_gelu_mul(x, x), tF.gelu(tx, approximate="tanh") * tx),
    ]
    for got, want in cases:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    gradcheck(flow._C.quick_gelu, a)
    gradcheck(flow._C.square_relu, np.where(np.abs(a) < 0.05, 0.1, a))
    gradcheck(F.glu, a)
    with pytest.raises(RuntimeError, match="glu"):
        F.glu(flow.ones(3, 5))


def test_prelu_per_channel_and_shared():
    a = RNG.uniform(-2, 2, size=(2, 3, 4))
    a = np.where(np.abs(a) < 0.05, 0.1, a)
    w = np.array([0.1, 0.2, -0.3])
    got = flow.nn.functional.prelu(flow.tensor(a), flow.tensor(w))
    np.testing.assert_allclose(got.numpy(), torch.nn.functional.prelu(_t(a), _t(w)).numpy())
    gradcheck(flow.nn.functional.prelu, a, w)
    gradcheck(flow.nn.functional.prelu, a, np.array([0.25]))
    m = flow.nn.PReLU(3, init=0.1)
    assert m.weight.tolist() == pytest.approx([0.1] * 3)
    m(flow.tensor(a, dtype=flow.float32)).sum().backward()
    assert m.weight.grad.shape == (3,)
    with pytest.raises(RuntimeError, match="prelu"):
        flow.nn.functional.prelu(flow.tensor(a), flow.tensor([0.1, 0.2]))


def test_fused_glu_matches_composite():
    x = RNG.standard_normal((2, 3, 4))
    w, b = RNG.standard_normal((6, 4)), RNG.standard_normal(6)
    got = flow._C.fused_glu(flow.tensor(x), flow.tensor(w), flow.tensor(b), activation="silu")
    h = _t(x) @ _t(w).T + _t(b)
    want = h[..., :3] * torch.nn.functional.silu(h[..., 3:])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    v, c = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    got = flow._C.fused_glu(flow.tensor(x), flow.tensor(w[:3]), None, flow.tensor(v),
                            flow.tensor(c), activation="relu")
    want = (_t(x) @ _t(w[:3]).T) * torch.relu(_t(x) @ _t(v).T + _t(c))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="fused_glu"):
        flow._C.fused_glu(flow.tensor(x), flow.tensor(w), activation="tanh")


def test_broadcast_shapes_and_tensors():
    assert flow.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    assert flow.broadcast_shapes() == ()
    with pytest.raises(Exception, match="broadcast_shapes"):
        flow.broadcast_shapes((2,), (3,))
    a, b = flow.broadcast_tensors(flow.ones(2, 1), flow.zeros(3))
    assert a.shape == (2, 3) and b.shape == (2, 3) and b.sum().item() == 0


# ---- activation layers and nn.functional -------------------------------------------------------

LAYERS = [("ReLU6", {}), ("SELU", {}), ("CELU", {"alpha": 0.5}), ("Mish", {}),
          ("Hardtanh", {"min_val": -0.5, "max_val": 0.7}), ("Hardsigmoid", {}),
          ("Hardswish", {}), ("Hardshrink", {"lambd": 0.3}), ("Softshrink", {"lambd": 0.3}),
          ("Softsign", {}), ("LogSigmoid", {}), ("Tanhshrink", {}),
          ("Threshold", {"threshold": 0.2, "value": -1.0}), ("GLU", {}), ("Softmin", {"dim": 1})]


@pytest.mark.parametrize("name,kwargs", LAYERS)
def test_activation_layers_match_torch(name, kwargs):
    a = RNG.uniform(-4, 4, size=(3, 4))
    got = getattr(flow.nn, name)(**kwargs)(flow.tensor(a))
    want = getattr(torch.nn, name)(**kwargs)(_t(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_inplace_layers_and_tensor_parameters():
    a = RNG.uniform(-4, 4, size=(5,))
    for name in ("ReLU6", "SELU", "Mish", "Hardsigmoid", "Hardswish"):
        x = flow.tensor(a)
        y = getattr(flow.nn, name)(inplace=True)(x)
        assert y is x or np.shares_memory(y.numpy(), x.numpy())
        np.testing.assert_allclose(x.numpy(), getattr(torch.nn, name)()(_t(a)).numpy(),
                                   rtol=1e-12)
    x = flow.tensor(a)
    flow.nn.functional.threshold_(x, flow.tensor(0.5), 2.0)
    np.testing.assert_allclose(x.numpy(), np.where(a > 0.5, a, 2.0))
    out = flow.nn.functional.threshold(flow.tensor(a), threshold=flow.tensor(0.1), value=0.0)
    np.testing.assert_allclose(out.numpy(), np.where(a > 0.1, a, 0.0))


# ---- double backward through grad_outputs --------------------------------------------------------

def test_grad_of_grad_with_respect_to_grad_output():
    a, v = RNG.uniform(-1, 1, size=(2, 3)), RNG.uniform(0, 1, size=(2, 3))
    x = flow.tensor(a, dtype=flow.float32, requires_grad=True)
    g0 = flow.tensor(v, requires_grad=True)  # a float64 grad_output for a float32 output
    (gx,) = flow.autograd.grad(flow.sin(x), x, g0, create_graph=True)
    (dg,) = flow.autograd.grad(gx, g0, flow.tensor(v))
    tx = torch.tensor(a, dtype=torch.float32, requires_grad=True)
    tg0 = torch.tensor(v, requires_grad=True)
    (tgx,) = torch.autograd.grad(torch.sin(tx), tx, tg0, create_graph=True)
    (tdg,) = torch.autograd.grad(tgx, tg0, torch.tensor(v))
    np.testing.assert_allclose(dg.numpy(), tdg.numpy(), rtol=1e-6)
    # without create_graph the grad_output stays outside the graph
    (gx2,) = flow.autograd.grad(flow.sin(x), x, g0)
    assert not gx2.requires_grad


def test_inplace_addcmul_on_a_graph_tensor_backward_matches_torch():
    a, b, c = (RNG.uniform(0.5, 2, size=(2, 3)) for _ in range(3))
    x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x + 1.0, tx + 1.0
    y.addcmul_(flow.tensor(b), flow.tensor(c), value=3)
    ty.addcmul_(torch.tensor(b), torch.tensor(c), value=3)
    y.addcdiv_(flow.tensor(b), flow.tensor(c), value=2)
    ty.addcdiv_(torch.tensor(b), torch.tensor(c), value=2)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_sign_of_bool_and_deepcopy_of_a_non_leaf():
    import copy
    assert flow.sign(flow.tensor([True, False])).tolist() == [True, False]
    x = flow.ones(2, requires_grad=True)
    assert copy.deepcopy(x).requires_grad  # a leaf keeps requires_grad
    y = copy.deepcopy(x * 2)  # a non-leaf copies as a new leaf without grad (as OneFlow)
    assert not y.requires_grad and y.grad_fn is None and y.tolist() == [2.0, 2.0]
    y.sin_()


def test_erf_of_a_zero_dim_float32_tensor():
    for v in (0.3, -2.0):
        got = flow.erf(flow.tensor(v))
        assert got.shape == () and got.dtype is flow.float32
        assert got.item() == pytest.approx(torch.erf(torch.tensor(v)).item(), rel=1e-6)


def test_special_functions_without_scipy_match_scipy(monkeypatch):
    """The NumPy forms used when SciPy is not installed (erfinv, digamma, polygamma)."""
    sp = pytest.importorskip("scipy.special")
    import actorflow.ops.special as special

    monkeypatch.setattr(special, "_scipy", lambda name: None)
    rng = np.random.default_rng(0)
    y = np.concatenate([rng.uniform(-0.999, 0.999, 500), [0.0, 1.0, -1.0, 1.5]])
    np.testing.assert_allclose(special._erfinv_array(y), sp.erfinv(y), rtol=1e-9, atol=1e-12)
    x = np.concatenate([rng.uniform(-20, 30, 800), [1e-8, 0.5, 100.0, 1e5, -3.7, 0.0, -2.0]])
    np.testing.assert_allclose(special._polygamma_array(0, x.copy()),
                               np.where(x == 0, -np.inf, sp.psi(x)), rtol=1e-10)
    for n in (1, 2, 3):
        np.testing.assert_allclose(special._polygamma_array(n, x.copy()), sp.polygamma(n, x),
                                   rtol=1e-10)
