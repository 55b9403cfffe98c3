"""Eager ``step()`` issues a group's updates as one ``multi_tensor_update`` op (foreach-style):
the protocol (one op per run of same-op, same-attrs updates) and the numbers (the same bits as
one update op per parameter)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.optim.optimizer as optimizer_module
from actorflow import nn

OPTIMIZERS = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                              weight_decay=0.01),
    "adam_amsgrad": lambda ps: flow.optim.Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
    "adamw": lambda ps: flow.optim.AdamW(ps, lr=0.01, weight_decay=0.01),
    "rmsprop_centered": lambda ps: flow.optim.RMSprop(ps, lr=0.01, centered=True, momentum=0.5),
    "adagrad": lambda ps: flow.optim.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: flow.optim.Adadelta(ps, lr=1.0),
    "lamb": lambda ps: flow.optim.LAMB(ps, lr=0.01, weight_decay=0.01),
}


def _model(seed: int):
    # the first weight is too large for the merged small-parameter path, the rest are merged
    flow.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 2000), nn.Tanh(), nn.Linear(2000, 3))


def _backward(model, x):
    model.zero_grad()
    model(x).square().sum().backward()


def _step_one_by_one(opt) -> None:
    """What step() did before batching: one update op per parameter."""
    with flow.no_grad():
        for i, group in enumerate(opt.param_groups):
            lr, attrs = opt._lr_tensor(group), opt._attrs(group)
            for p, g in opt._grads(i):
                opt._update(p, g, lr, attrs, group)


def _train_both(a, opt_a, b, opt_b, steps: int) -> None:
    """``steps`` steps of model ``a`` with ``opt_a.step()`` and of ``b`` one op per parameter."""
    x = flow.randn(4, 5)
    for _ in range(steps):
        _backward(a, x)
        opt_a.step()
        _backward(b, x)
        _step_one_by_one(opt_b)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_batched_step_matches_one_op_per_parameter(name):
    a, b = _model(0), _model(0)
    opt_a, opt_b = OPTIMIZERS[name](a.parameters()), OPTIMIZERS[name](b.parameters())
    _train_both(a, opt_a, b, opt_b, 3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())
    for sa, sb in zip(opt_a.state.values(), opt_b.state.values()):
        for k in sa:
            np.testing.assert_array_equal(sa[k].numpy(), sb[k].numpy())


def test_one_multi_tensor_update_per_group(monkeypatch):
    issued = []
    real = optimizer_module.apply

    def spy(op, inputs, attrs, *rest):
        issued.append((op.name, len(inputs)))
        return real(op, inputs, attrs, *rest)

    monkeypatch.setattr(optimizer_module, "apply", spy)
    model = _model(0)
    params = list(model.parameters())
    opt = flow.optim.Adam([{"params": params[:3]}, {"params": params[3:], "lr": 0.5}], lr=0.1)
    _backward(model, flow.randn(4, 5))
    params[1].grad = None  # a parameter without a gradient is left out
    opt.step()
    # group 0: two parameters with gradients (5 inputs each without lr) plus lr; group 1: one
    assert issued == [("multi_tensor_update", 1 + 2 * 5), ("adam_update", 6)]
    assert opt.state[params[0]]["step"].item() == 1 and params[1] not in opt.state


def test_parameters_of_different_dtypes_share_a_batch():
    lin = nn.Linear(3, 2)
    lin.bias = nn.Parameter(flow.zeros(2, dtype=flow.float64))
    opt = flow.optim.SGD(lin.parameters(), lr=0.5)
    lin.weight.grad = flow.ones(2, 3)
    lin.bias.grad = flow.ones(2, dtype=flow.float64)
    w0 = lin.weight.numpy().copy()
    opt.step()
    np.testing.assert_allclose(lin.weight.numpy(), w0 - 0.5)
    assert lin.bias.dtype is flow.float64 and lin.bias.numpy().tolist() == [-0.5, -0.5]


def test_a_parameter_listed_twice_is_updated_twice_as_one_by_one():
    a, b = _model(0), _model(0)
    pa, pb = list(a.parameters()), list(b.parameters())
    with pytest.warns(UserWarning, match="duplicate parameters"):
        opt_a = flow.optim.Adam(pa + pa[1:2], lr=0.1)
        opt_b = flow.optim.Adam(pb + pb[1:2], lr=0.1)
    _train_both(a, opt_a, b, opt_b, 2)
    for ta, tb in zip(pa, pb):
        np.testing.assert_array_equal(ta.numpy(), tb.numpy())
