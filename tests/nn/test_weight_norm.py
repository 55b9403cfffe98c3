"""nn.utils.weight_norm / remove_weight_norm vs PyTorch (float64: parameters, outputs and the
gradients of weight_g and weight_v for several dims), and Module.register_state_dict_pre_hook."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(torch is None, reason="needs PyTorch"),
              pytest.mark.timeout(60)]


@pytest.mark.parametrize("kind,dim", [("linear", 0), ("linear", 1), ("linear", None),
                                      ("conv", 0), ("conv", 2), ("conv", -1)])
def test_weight_norm_matches_torch(kind, dim):
    torch.manual_seed(0)
    if kind == "linear":
        tm, fm, x = torch.nn.Linear(4, 3), nn.Linear(4, 3), np.random.randn(5, 4)
    else:
        tm, fm, x = torch.nn.Conv2d(2, 3, 3), nn.Conv2d(2, 3, 3), np.random.randn(1, 2, 5, 5)
    tm, fm = tm.double(), fm.double()
    fm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    tm = torch.nn.utils.weight_norm(tm, dim=dim)
    assert nn.utils.weight_norm(fm, dim=dim) is fm
    assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for (n, fp), (_, tp) in zip(fm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(fp.detach().numpy(), tp.detach().numpy(), atol=1e-12,
                                   err_msg=n)
    with torch.no_grad():  # change g and v: the weight must follow
        tm.weight_g.mul_(1.5)
        tm.weight_v.add_(0.25)
    fm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    fo, to = fm(flow.tensor(x)), tm(torch.tensor(x))
    np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=1e-12)
    (fo * fo).sum().backward()
    (to * to).sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        np.testing.assert_allclose(getattr(fm, name).grad.numpy(),
                                   getattr(tm, name).grad.numpy(), atol=1e-10, err_msg=name)
    nn.utils.remove_weight_norm(fm)
    torch.nn.utils.remove_weight_norm(tm)
    assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    np.testing.assert_allclose(fm.weight.detach().numpy(), tm.weight.detach().numpy(),
                               atol=1e-12)
    assert isinstance(fm.weight, nn.Parameter) and not fm._forward_pre_hooks


def test_weight_norm_errors():
    m = nn.utils.weight_norm(nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        nn.utils.weight_norm(m)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(m, "bias")
    with pytest.raises(ValueError, match="no parameter 'nope'"):
        nn.utils.weight_norm(nn.Linear(2, 2), "nope")
    with pytest.raises(IndexError, match="out of range"):
        nn.utils.weight_norm(nn.Linear(2, 2), dim=3)


def test_state_dict_pre_hook():
    calls = []
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    handle = net[1].register_state_dict_pre_hook(
        lambda m, prefix, keep_vars: calls.append((type(m).__name__, prefix, keep_vars)))
    keys = list(net.state_dict(keep_vars=True))
    assert calls == [("Linear", "1.", True)]
    assert keys == ["0.weight", "0.bias", "1.weight", "1.bias"]
    handle.remove()
    net.state_dict()
    assert len(calls) == 1
