"""Stochastic weight averaging (nn.optimizer.swa_utils) against torch.optim.swa_utils."""
import numpy as np
import pytest

import actorflow as flow
from actorflow.nn.optimizer.swa_utils import SWALR, AveragedModel, update_bn
from actorflow.optim import swa_utils as optim_swa_utils
from tests.helpers import torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def _net(lib, w, b):
    m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4))
    with lib.no_grad():
        m[0].weight.copy_(lib.tensor(w))
        m[0].bias.copy_(lib.tensor(b))
    return m


@needs_torch
@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("ema", [False, True])
def test_averaged_model_like_torch(use_buffers, ema):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nets = [_net(flow, w, b), _net(torch, w, b)]
    avg_fn = (lambda a, p, n: 0.75 * a + 0.25 * p) if ema else None
    avgs = [AveragedModel(nets[0], avg_fn=avg_fn, use_buffers=use_buffers),
            torch.optim.swa_utils.AveragedModel(nets[1], avg_fn=avg_fn, use_buffers=use_buffers)]
    for _ in range(4):
        x = rng.standard_normal((5, 3)).astype(np.float32)
        steps = [rng.standard_normal(p.shape).astype(np.float32) for p in nets[1].parameters()]
        for lib, net, avg in ((flow, nets[0], avgs[0]), (torch, nets[1], avgs[1])):
            net(lib.tensor(x))  # moves the batch-norm running statistics
            with lib.no_grad():
                for p, s in zip(net.parameters(), steps):
                    p.add_(lib.tensor(s))
            avg.update_parameters(net)
    assert int(avgs[0].n_averaged) == int(avgs[1].n_averaged) == 4
    for a, t in zip(avgs[0].state_dict().values(), avgs[1].state_dict().values()):
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("strategy,anneal", [("cos", 3), ("linear", 4), ("cos", 0)])
def test_swalr_like_torch(strategy, anneal):
    def lrs(lib, swalr_cls):
        p = [lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(2))]
        opt = lib.optim.SGD([{"params": [p[0]]}, {"params": [p[1]], "lr": 0.5}], lr=0.05)
        sched = swalr_cls(opt, swa_lr=[0.01, 0.2], anneal_epochs=anneal,
                          anneal_strategy=strategy)
        out = []
        for _ in range(7):
            opt.step()
            sched.step()
            out.append([g["lr"] for g in opt.param_groups])
        return out

    np.testing.assert_allclose(lrs(flow, SWALR), lrs(torch, torch.optim.swa_utils.SWALR),
                               rtol=1e-12)


def test_swalr_rejects_bad_arguments():
    opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must"):
        SWALR(opt, swa_lr=1.0, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must"):
        SWALR(opt, swa_lr=1.0, anneal_epochs=1.5)
    with pytest.raises(ValueError, match="swa_lr must"):
        SWALR(opt, swa_lr=[1.0, 2.0])


def test_update_bn_is_the_plain_average_over_the_loader():
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((6, 3)).astype(np.float32) for _ in range(3)]
    net = flow.nn.Sequential(flow.nn.BatchNorm1d(3, momentum=0.3))
    net.eval()
    update_bn([(flow.tensor(x), 0) for x in batches], net)
    bn = net[0]
    assert bn.momentum == 0.3 and not net.training
    np.testing.assert_allclose(bn.running_mean.numpy(),
                               np.mean([x.mean(0) for x in batches], axis=0), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(),
                               np.mean([x.var(0, ddof=1) for x in batches], axis=0), rtol=1e-5)


def test_optim_swa_utils_is_the_same_module_api():
    assert optim_swa_utils.AveragedModel is AveragedModel and optim_swa_utils.SWALR is SWALR
    assert flow.optim.swa_utils.update_bn is update_bn
    with pytest.raises(AttributeError):
        assert optim_swa_utils.nothing_here is None
