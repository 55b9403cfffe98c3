"""Module API breadth (issue #16): backward hooks, state-dict hooks, utils.checkpoint."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow


def test_full_backward_hook_sees_and_replaces_grad_input():
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append((module, grad_input[0].numpy().tolist(), grad_output[0].numpy().tolist()))
        return (flow.tensor([3.0, 3.0]),)

    m = flow.nn.ReLU()
    handle = m.register_full_backward_hook(hook)
    x0 = flow.tensor([1.0, -1.0], requires_grad=True)
    m(x0 + 1).sum().backward()
    assert seen == [(m, [1.0, 0.0], [1.0, 1.0])]
    np.testing.assert_array_equal(x0.grad.numpy(), [3.0, 3.0])
    handle.remove()
    x0.grad = None
    m(x0 + 1).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(x0.grad.numpy(), [1.0, 0.0])


def test_backward_hook_without_input_grad_and_multiple_outputs():
    calls = []
    lin = flow.nn.Linear(3, 2)
    lin.register_backward_hook(lambda m, gi, go: calls.append((gi, go[0].shape)))
    lin(flow.ones(4, 3)).sum().backward()  # input needs no grad: grad_input is (None,)
    assert calls == [((None,), (4, 2))]

    class Split(flow.nn.Module):
        def forward(self, x):
            return x * 2, x * 3

    got = []
    s = Split()
    s.register_full_backward_hook(lambda m, gi, go: got.append((gi[0].numpy(),
                                                                [g.numpy() for g in go])))
    x = flow.ones(2, requires_grad=True)
    a, b = s(x)
    (a.sum() + 2 * b.sum()).backward()
    np.testing.assert_array_equal(got[0][0], [8.0, 8.0])
    np.testing.assert_array_equal(got[0][1][1], [2.0, 2.0])


def test_state_dict_hook():
    def hook(module, destination, prefix, local_metadata):
        destination[prefix + "extra"] = flow.zeros(1)

    m = flow.nn.Sequential(flow.nn.Linear(2, 2))
    m[0]._register_state_dict_hook(hook)
    sd = m.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "0.extra"]


def test_checkpoint_recomputes_with_same_gradients():
    counts = {"fwd": 0}

    def block(x):
        counts["fwd"] += 1
        return flow.nn.functional.dropout(flow.tanh(x) * 2, 0.5)

    flow.manual_seed(0)
    conv = flow.nn.Conv1d(2, 2, 3)
    x1 = flow.randn(1, 2, 8).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    flow.manual_seed(1)
    y1 = flow.utils.checkpoint.checkpoint(block, conv(x1))
    y1.sum().backward()
    assert counts["fwd"] == 2  # forward + recompute
    g1 = conv.weight.grad.numpy().copy()
    conv.weight.grad = None
    flow.manual_seed(1)
    y2 = block(conv(x2))  # same seed: the same dropout mask
    y2.sum().backward()
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(g1, conv.weight.grad.numpy(), rtol=1e-6)
    with pytest.warns(UserWarning, match="requires grad"):
        flow.utils.checkpoint.checkpoint(block, flow.ones(2))


def test_empty_optimizer_steps():
    opt = flow.optim.Adam(flow.nn.ReLU().parameters())
    opt.zero_grad()
    opt.step()
