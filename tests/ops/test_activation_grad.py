"""The backward ops of the piecewise activations (``ops/activation_grad.py``): first and second
derivatives against PyTorch's ``*_backward`` ops in float64 (the input is reached, with zeros),
finite differences, NaN gradients on a masked element, their shape check, and a Graph whose
backward runs them as generated C."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as AF
from actorflow.compiler import codegen
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, to_torch, torch

pytestmark = pytest.mark.timeout(300)
RNG = np.random.default_rng(24)

# (name, args) called as F.<name>(x, *args) in both libraries
CASES = [("leaky_relu", (0.3,)), ("leaky_relu", (-0.7,)), ("hardtanh", (-2.5, 1.5)),
         ("relu6", ()), ("hardshrink", (0.8,)), ("softshrink", (0.8,)),
         ("threshold", (0.4, -3.0)), ("elu", (0.7,)), ("celu", (2.0,)), ("selu", ())]


def _grads(lib, fn, a, u, v, args):
    """(dx, ddx, ddy) of ``y = fn(x)``: dx = grad(y, x, dy) with create_graph, then
    grad(dx, [x, dy], v)."""
    x, gy = lib.tensor(a, requires_grad=True), lib.tensor(u, requires_grad=True)
    (dx,) = lib.autograd.grad(fn(x, *args), x, gy, create_graph=True)
    ddx, ddy = lib.autograd.grad(dx, [x, gy], lib.tensor(v))
    return [t.detach().numpy() for t in (dx, ddx, ddy)]


@pytest.mark.parametrize("name,args", CASES)
def test_second_derivatives_match_torch(name, args):
    a = RNG.uniform(-5, 5, (8, 8))
    u, v = RNG.standard_normal((8, 8)), RNG.standard_normal((8, 8))
    got = _grads(flow, getattr(AF, name), a, u, v, args)
    want = _grads(torch, getattr(torch.nn.functional, name), a, u, v, args)
    for g, w, what in zip(got, want, ("dx", "ddx", "ddy")):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, err_msg=f"{name} {what}")


def test_hardsigmoid_second_derivative():
    # PyTorch has no derivative of hardsigmoid_backward; as OneFlow's test: ddx zeros,
    # ddy = v * hardsigmoid'(x)
    a = RNG.uniform(-5, 5, (8, 8))
    u, v = RNG.standard_normal((8, 8)), RNG.standard_normal((8, 8))
    dx, ddx, ddy = _grads(flow, AF.hardsigmoid, a, u, v, ())
    slope = np.where((a > -3) & (a < 3), 1 / 6, 0.0)
    np.testing.assert_allclose(dx, u * slope, rtol=1e-15)
    np.testing.assert_array_equal(ddx, np.zeros_like(a))
    np.testing.assert_allclose(ddy, v * slope, rtol=1e-15)


BACKWARD = [  # (functional, its args, PyTorch's backward op or None, its args)
    (flow.leaky_relu_grad, (0.2,), torch.ops.aten.leaky_relu_backward, (0.2, False)),
    (flow.hardtanh_grad, (-1.0, 2.0), torch.ops.aten.hardtanh_backward, (-1.0, 2.0)),
    (flow.threshold_grad, (0.5,), torch.ops.aten.threshold_backward, (0.5,)),
    (flow.shrink_grad, (0.5,), torch.ops.aten.hardshrink_backward, (0.5,)),
    (flow.hardsigmoid_grad, (), torch.ops.aten.hardsigmoid_backward, ()),
]


@pytest.mark.parametrize("fn,args,tfn,targs", BACKWARD, ids=lambda p: getattr(p, "__name__", ""))
def test_backward_ops_match_torch_with_nan_and_inf_values(fn, args, tfn, targs):
    a = RNG.uniform(-4, 4, (5, 7))
    a[0, :3] = [np.inf, -np.inf, 0.5]  # (a NaN x: PyTorch's vectorised and scalar loops differ)
    g = RNG.standard_normal((5, 7))
    g[1, :3] = [np.nan, np.inf, -np.inf]  # masked or not, depending on x
    a[1, :3] = [0.1, 10.0, -10.0]
    for dtype in (np.float64, np.float32):
        got = fn(flow.tensor(g.astype(dtype)), flow.tensor(a.astype(dtype)), *args).numpy()
        want = tfn(to_torch(g.astype(dtype)), to_torch(a.astype(dtype)), *targs).numpy()
        assert got.dtype == dtype
        # hardsigmoid: PyTorch multiplies by 1/6 rounded to float32, also in float64
        rtol = 3e-7 if fn is flow.hardsigmoid_grad else 0
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


def test_relu_and_threshold_gradients_pass_dy_at_nan_as_torch():
    # threshold_backward is the one backward op whose NaN-x answer PyTorch's loops agree on
    x = np.zeros(64)
    x[[0, 5, 63]] = [np.nan, -1.0, 2.0]
    g = RNG.standard_normal(64)
    g[[1, 5]] = np.nan  # a masked NaN dy gives 0 (a select, not a product)
    for dtype in (np.float64, np.float32):
        xt = to_torch(x.astype(dtype)).requires_grad_()
        torch.relu(xt).backward(to_torch(g.astype(dtype)))
        xf = flow.tensor(x.astype(dtype), requires_grad=True)
        flow.relu(xf).backward(flow.tensor(g.astype(dtype)))
        np.testing.assert_array_equal(xf.grad.numpy(), xt.grad.numpy())
        got = flow.threshold_grad(flow.tensor(g.astype(dtype)), flow.tensor(x.astype(dtype)), 0.0)
        want = torch.ops.aten.threshold_backward(to_torch(g.astype(dtype)),
                                                 to_torch(x.astype(dtype)), 0.0)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("fn,args", [(b[0], b[1]) for b in BACKWARD],
                         ids=lambda p: getattr(p, "__name__", ""))
def test_backward_ops_gradcheck(fn, args):
    a = RNG.uniform(-4, 4, (3, 4))
    a[np.abs(np.abs(a) - 0.5) < 0.05] += 0.2  # away from the kinks
    gradcheck(lambda dy, x: fn(dy, x, *args), RNG.standard_normal((3, 4)), a)


def test_backward_op_rejects_different_shapes():
    with pytest.raises(OpError, match=r"leaky_relu_grad: .*\(2, 3\), \(3,\)"):
        flow.leaky_relu_grad(flow.ones(2, 3), flow.ones(3), 0.1)


def test_graph_backward_runs_the_backward_ops_as_generated_c(monkeypatch):
    monkeypatch.setenv(codegen.ENV, "1")
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((32, 8)).astype(np.float32))

    def make():
        flow.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.1), nn.Linear(16, 16),
                             nn.Hardtanh(-0.5, 0.5), nn.Linear(16, 1))

    eager_model, graph_model = make(), make()
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.1)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(flow.optim.SGD(graph_model.parameters(), lr=0.1))

        def build(self, a):
            loss = (self.model(a) * 0.5 + 0.25).square().mean()
            loss.backward()
            return loss

    g = Train()
    for _ in range(3):
        loss = (eager_model(x) * 0.5 + 0.25).square().mean()
        loss.backward()
        eager_opt.step()
        eager_opt.zero_grad()
        np.testing.assert_allclose(g(x).numpy(), loss.numpy(), rtol=1e-5)
    # each backward op runs as generated C (a one-step program, or inside a fused one)
    generated = {t.op_type for t in g.plan.tasks if t.generated}
    generated |= {op for t in g.plan.tasks if t.generated for op in t.attrs.get("ops") or ()}
    assert {"leaky_relu_grad", "hardtanh_grad"} <= generated, generated
