"""Replacing state a compiled nn.Graph bound (a parameter, a buffer, optimizer state, a tensor's
storage of another shape or dtype) makes the next call compile against the new state, with the
reason in the compile log; state that still holds costs no recompile."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F

pytestmark = pytest.mark.timeout(60)


class _Eval(nn.Graph):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def build(self, x):
        return self.m(x)


def test_a_replaced_parameter_is_used_by_the_next_call():
    m = nn.Linear(3, 2)
    g, x = _Eval(m), flow.ones(1, 3)
    g(x).numpy()
    m.weight = nn.Parameter(flow.full((2, 3), 2.0))
    np.testing.assert_allclose(g(x).numpy(), m(x).numpy())
    assert g.compile_count == 2 and "m.weight was replaced" in g.compile_log[-1]


def test_a_replaced_buffer_and_a_dtype_change_recompile():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).eval()
    g, x = _Eval(m), flow.randn(5, 3)
    g(x).numpy()
    m[1].running_mean = flow.full((4,), 0.5)
    np.testing.assert_allclose(g(x).numpy(), m(x).numpy(), rtol=1e-6)
    assert "running_mean was replaced" in g.compile_log[-1]
    m.double()
    xd = x.double()
    np.testing.assert_allclose(g(xd).numpy(), m(xd).numpy(), rtol=1e-12)


def test_data_of_another_shape_recompiles_same_shape_does_not():
    m = nn.Linear(3, 2)
    g, x = _Eval(m), flow.ones(1, 3)
    g(x).numpy()
    with flow.no_grad():
        m.bias.data = flow.full((2,), 7.0)  # same shape and dtype: read live, no recompile
    np.testing.assert_allclose(g(x).numpy(), m(x).numpy())
    assert g.compile_count == 1
    m.weight.data = flow.ones(4, 3)  # another shape, same input: the graph must not read
    m.bias.data = flow.zeros(4)      # it as the (2, 3) it traced
    out = g(x).numpy()
    assert out.shape == (1, 4)
    np.testing.assert_allclose(out, m(x).numpy())
    assert g.compile_count == 2 and "changed from (2, 3)" in g.compile_log[-1]


def test_unrelated_state_changes_cost_no_recompile():
    m = nn.Linear(3, 2)
    g, x = _Eval(m), flow.ones(1, 3)
    g(x).numpy()
    other = nn.Linear(5, 5)
    other.weight = nn.Parameter(flow.zeros(5, 5))
    g(x).numpy()
    assert g.compile_count == 1


def test_optimizer_state_loaded_from_a_state_dict_is_trained_with():
    flow.manual_seed(0)
    m = nn.Linear(3, 2)
    opt = flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = F.mse_loss(self.m(x), y)
            loss.backward()
            return loss

    g = Train()
    x, y = flow.randn(4, 3), flow.randn(4, 2)
    g(x, y).item()
    saved_model = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    saved_opt = opt.state_dict()
    g(x, y).item()
    g(x, y).item()
    m.load_state_dict({k: flow.tensor(v) for k, v in saved_model.items()})
    opt.load_state_dict(saved_opt)  # replaces the momentum buffers
    after_reload = g(x, y).item()
    # the same step taken from the same state by a fresh graph
    flow.manual_seed(0)
    m2 = nn.Linear(3, 2)
    opt2 = flow.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    m2.load_state_dict({k: flow.tensor(v) for k, v in saved_model.items()})
    opt2.load_state_dict(saved_opt)
    loss2 = F.mse_loss(m2(x), y)
    loss2.backward()
    opt2.step()
    assert after_reload == pytest.approx(loss2.item(), rel=1e-6)
    for k, v in m2.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-6, atol=1e-7)
