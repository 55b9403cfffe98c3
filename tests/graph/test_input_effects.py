"""build()'s in-place writes to its inputs reach the caller's tensors, and backward() reaching
an input that requires grad accumulates into its .grad, as in eager mode (checked against
PyTorch)."""
import numpy as np
import pytest
import torch

import actorflow as flow

pytestmark = pytest.mark.timeout(120)


class _Write(flow.nn.Graph):
    def build(self, x, y):
        x.add_(1)
        y[:, 0].mul_(0)
        return x * 2 + y


def test_in_place_writes_to_inputs_reach_the_caller():
    rng = np.random.default_rng(0)
    a, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    x, y = flow.tensor(a), flow.tensor(c)
    tx, ty = torch.tensor(a), torch.tensor(c)
    g = _Write()
    for _ in range(3):
        out = g(x, y)
        tx.add_(1)
        ty[:, 0].mul_(0)
        np.testing.assert_allclose(out.numpy(), (tx * 2 + ty).numpy())
        np.testing.assert_allclose(x.numpy(), tx.numpy())
        np.testing.assert_allclose(y.numpy(), ty.numpy())


class _Square(flow.nn.Graph):
    def build(self, x, w):
        loss = (x * x * w).sum()
        loss.backward()
        return loss


def test_backward_fills_and_accumulates_input_grads():
    rng = np.random.default_rng(1)
    a, c = rng.standard_normal((4,)), rng.standard_normal((4,))
    x = flow.tensor(a, requires_grad=True)
    w = flow.tensor(c)  # no grad wanted: stays None
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(c)
    g = _Square()
    for _ in range(2):
        g(x, w)
        (tx * tx * tw).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    assert w.grad is None


def test_input_grad_in_a_training_graph():
    rng = np.random.default_rng(2)
    wa = rng.standard_normal((2, 3))
    lin = flow.nn.Linear(3, 2, bias=False).to(flow.float64)
    lin.weight.data = flow.tensor(wa)
    tlin = torch.nn.Linear(3, 2, bias=False).double()
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(wa))
    opt = flow.optim.SGD(lin.parameters(), lr=0.1)

    class G(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.add_optimizer(opt)

        def build(self, x):
            loss = (self.lin(x) ** 2).sum()
            loss.backward()
            return loss

    a = rng.standard_normal((5, 3))
    x = flow.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    G()(x)
    (tlin(tx) ** 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
