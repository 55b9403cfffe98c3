"""Post-accumulation hooks fire inside backward's walk, as soon as a leaf's gradient is final
(PyTorch's ``register_post_accumulate_grad_hook``; OneFlow's
``_register_post_grad_accumulation_hook`` on top of it)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import actorflow as flow
from actorflow.autograd import engine


def _chain(log, rng):
    """A 3-layer chain; the hook of each weight logs when it fires and how many rule calls
    the engine had made by then."""
    ws = [flow.tensor(rng.standard_normal((4, 4)), requires_grad=True) for _ in range(3)]
    calls = []
    orig = engine.Node.apply

    def counting(self, douts):
        calls.append(self.op.name)
        return orig(self, douts)

    for i, w in enumerate(ws):
        w.register_post_accumulate_grad_hook(
            lambda t, i=i: log.append((i, len(calls), t.grad.numpy().copy())))
    return ws, calls, counting


def test_hook_fires_when_the_leaf_is_final_not_after_the_walk(monkeypatch):
    rng = np.random.default_rng(0)
    log = []
    ws, calls, counting = _chain(log, rng)
    monkeypatch.setattr(engine.Node, "apply", counting)
    x = flow.tensor(rng.standard_normal((2, 4)))
    h = x
    for w in ws:
        h = flow.tanh(h @ w)
    h.sum().backward()
    total = len(calls)
    order = [i for i, _, _ in log]
    assert order == [2, 1, 0], order  # the last layer's weight is final first
    # the first two hooks fired while gradient rules were still to run
    assert log[0][1] < total and log[1][1] < total, (log, total)
    # values: what the hook saw is the final .grad, equal to PyTorch's
    tws = [torch.tensor(w.numpy(), requires_grad=True) for w in ws]
    th = torch.tensor(x.numpy())
    for w in tws:
        th = torch.tanh(th @ w)
    th.sum().backward()
    for i, _, g in log:
        np.testing.assert_allclose(g, tws[i].grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(ws[i].grad.numpy(), g, rtol=1e-12)


def test_hook_sees_the_accumulated_grad_and_waits_for_every_contribution():
    a = flow.tensor([1.0, 2.0], dtype=flow.float64, requires_grad=True)
    seen = []
    handle = a.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    # a is used twice, at both ends of the graph: the hook fires once, with the sum
    y = (a * 3.0).exp().sum() + (a * a).sum()
    y.backward()
    want = 3 * np.exp(3 * np.array([1.0, 2.0])) + 2 * np.array([1.0, 2.0])
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], want, rtol=1e-12)
    # a second backward accumulates into .grad: the hook sees the sum of both
    (a * a).sum().backward()
    assert len(seen) == 2
    np.testing.assert_allclose(seen[1], want + 2 * np.array([1.0, 2.0]), rtol=1e-12)
    handle.remove()
    a.sum().backward()
    assert len(seen) == 2


def test_hook_on_a_root_leaf_and_errors():
    a = flow.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    a.register_post_accumulate_grad_hook(lambda t: seen.append(t is a))
    a.backward(flow.tensor([1.0, 1.0]))
    assert seen == [True]
    with pytest.raises(RuntimeError, match="leaf tensors"):
        (a * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="leaf tensors"):
        flow.zeros(2).register_post_accumulate_grad_hook(lambda t: None)
    # autograd.grad does not accumulate: no hook
    flow.autograd.grad((a * 2).sum(), a)
    assert seen == [True]


def test_oneflow_hook_runs_in_the_walk_and_may_replace_grad():
    x = flow.zeros(3, requires_grad=True)
    y = flow.zeros(3, requires_grad=True)
    order = []

    def on_x(g):
        order.append("x")
        return g * 2

    x._register_post_grad_accumulation_hook(on_x)
    y._register_post_grad_accumulation_hook(lambda g: order.append("y"))
    ((x + 1.0).exp().sum() * 0 + (y * 1.0).sum() + x.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))
    assert sorted(order) == ["x", "y"]


def test_queue_callback_runs_after_every_leaf_is_stored():
    a = flow.tensor([1.0, 2.0], requires_grad=True)
    b = flow.tensor([3.0], requires_grad=True)
    log = []

    def on_a(t):
        log.append("a")
        engine.queue_callback(lambda: log.append(("end", b.grad.numpy().tolist())))

    a.register_post_accumulate_grad_hook(on_a)
    b.register_post_accumulate_grad_hook(lambda t: log.append("b"))
    ((a * 2).sum() * b.sum()).backward()
    assert sorted(log[:2]) == ["a", "b"] and log[2] == ("end", [6.0]), log
    with pytest.raises(RuntimeError, match="no backward is running"):
        engine.queue_callback(lambda: None)
