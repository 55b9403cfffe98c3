"""A training nn.Graph follows changes made after it compiled to what its update bakes in:
optimizer hyperparameters other than lr, frozen parameters, added param groups (each
recompiles, with the reason in compile_log, and matches PyTorch step for step); gradient hooks
on a trained parameter are refused rather than skipped."""
import numpy as np
import pytest
import torch

import actorflow as flow

pytestmark = pytest.mark.timeout(120)


def _models(n_layers=1):
    rng = np.random.default_rng(0)
    ours, theirs = [], []
    for _ in range(n_layers):
        w = rng.standard_normal((3, 4))
        b = rng.standard_normal(3)
        m = flow.nn.Linear(4, 3).to(flow.float64)
        m.weight.data = flow.tensor(w)
        m.bias.data = flow.tensor(b)
        t = torch.nn.Linear(4, 3).double()
        with torch.no_grad():
            t.weight.copy_(torch.tensor(w))
            t.bias.copy_(torch.tensor(b))
        ours.append(m)
        theirs.append(t)
    return ours, theirs


class _Train(flow.nn.Graph):
    def __init__(self, mods, opt):
        super().__init__()
        self.mods = flow.nn.ModuleList(mods)
        self.add_optimizer(opt)

    def build(self, x):
        y = x
        for m in self.mods:
            y = m(y) if y.shape[-1] == 4 else y
        loss = (y * y).mean() + sum((m(x) ** 2).mean() for m in self.mods)
        loss.backward()
        return loss


def _torch_loss(mods, x):
    y = x
    for m in mods:
        y = m(y) if y.shape[-1] == 4 else y
    return (y * y).mean() + sum((m(x) ** 2).mean() for m in mods)


def _xs(n):
    rng = np.random.default_rng(1)
    return [rng.standard_normal((5, 4)) for _ in range(n)]


def _run(graph, ours, tmods, topt, xs, change_at, change):
    for i, x in enumerate(xs):
        if i == change_at:
            change()
        graph(flow.tensor(x))
        topt.zero_grad()
        _torch_loss(tmods, torch.tensor(x)).backward()
        topt.step()
    for m, t in zip(ours, tmods):
        np.testing.assert_allclose(m.weight.numpy(), t.weight.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
        np.testing.assert_allclose(m.bias.numpy(), t.bias.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.parametrize("key,value", [("weight_decay", 0.3), ("momentum", 0.9),
                                       ("dampening", 0.5), ("nesterov", True)])
def test_sgd_hyperparameter_change_recompiles(key, value):
    ours, tmods = _models()
    opt = flow.optim.SGD(ours[0].parameters(), lr=0.1, momentum=0.5)
    topt = torch.optim.SGD(tmods[0].parameters(), lr=0.1, momentum=0.5)
    g = _Train(ours, opt)

    def change():
        if key == "nesterov":
            for grp in (opt.param_groups[0], topt.param_groups[0]):
                grp["dampening"] = 0.0
        opt.param_groups[0][key] = value
        topt.param_groups[0][key] = value

    _run(g, ours, tmods, topt, _xs(5), 2, change)
    assert g.compile_count == 2
    assert key in g.compile_log[-1], g.compile_log


def test_sgd_momentum_from_zero():
    ours, tmods = _models()
    opt = flow.optim.SGD(ours[0].parameters(), lr=0.1)
    topt = torch.optim.SGD(tmods[0].parameters(), lr=0.1)
    g = _Train(ours, opt)

    def change():
        opt.param_groups[0]["momentum"] = 0.8
        topt.param_groups[0]["momentum"] = 0.8

    _run(g, ours, tmods, topt, _xs(5), 2, change)
    assert "momentum" in g.compile_log[-1]


@pytest.mark.parametrize("key,value", [("betas", (0.5, 0.9)), ("eps", 1e-2),
                                       ("weight_decay", 0.1)])
def test_adam_hyperparameter_change(key, value):
    ours, tmods = _models()
    opt = flow.optim.Adam(ours[0].parameters(), lr=0.05)
    topt = torch.optim.Adam(tmods[0].parameters(), lr=0.05)
    g = _Train(ours, opt)

    def change():
        opt.param_groups[0][key] = value
        topt.param_groups[0][key] = value

    _run(g, ours, tmods, topt, _xs(5), 3, change)
    assert g.compile_count == 2


def test_freezing_a_parameter_stops_its_update():
    ours, tmods = _models()
    opt = flow.optim.SGD(ours[0].parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    topt = torch.optim.SGD(tmods[0].parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
    g = _Train(ours, opt)
    frozen = {}

    def change():
        ours[0].bias.requires_grad_(False)
        tmods[0].bias.requires_grad_(False)
        tmods[0].bias.grad = None
        frozen["bias"] = ours[0].bias.numpy().copy()

    _run(g, ours, tmods, topt, _xs(5), 2, change)
    np.testing.assert_array_equal(ours[0].bias.numpy(), frozen["bias"])
    assert "requires_grad True -> False" in g.compile_log[-1]
    assert "bias" in g.compile_log[-1]


def test_add_param_group_trains_the_new_group():
    ours, tmods = _models(2)
    opt = flow.optim.SGD(ours[0].parameters(), lr=0.1)
    topt = torch.optim.SGD(tmods[0].parameters(), lr=0.1)
    g = _Train(ours, opt)

    def change():
        opt.add_param_group({"params": list(ours[1].parameters()), "lr": 0.05,
                             "momentum": 0.5})
        topt.add_param_group({"params": list(tmods[1].parameters()), "lr": 0.05,
                              "momentum": 0.5})

    _run(g, ours, tmods, topt, _xs(4), 2, change)
    assert "add_param_group" in g.compile_log[-1]


def test_unchanged_state_does_not_recompile():
    ours, _ = _models()
    opt = flow.optim.Adam(ours[0].parameters(), lr=0.05)
    g = _Train(ours, opt)
    for x in _xs(4):
        g(flow.tensor(x))
        opt.param_groups[0]["lr"] *= 0.5  # lr is a per-call value
    assert g.compile_count == 1


@pytest.mark.parametrize("when", ["before", "after"])
def test_gradient_hook_on_a_parameter_is_refused(when):
    ours, _ = _models()
    opt = flow.optim.SGD(ours[0].parameters(), lr=0.1)
    g = _Train(ours, opt)
    x = flow.tensor(_xs(1)[0])
    if when == "after":
        g(x)
    handle = ours[0].weight.register_hook(lambda grad: grad * 2)
    with pytest.raises(RuntimeError, match=r"mods\.0\.weight has a gradient hook"):
        g(x)
    handle.remove()
    g(x).numpy()
