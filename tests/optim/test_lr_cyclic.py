"""OneCycleLR and CyclicLR vs PyTorch's, step by step: learning rates and momenta (SGD
momentum, Adam beta1) of every param group, every mode and anneal strategy."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(torch is None, reason="needs PyTorch"),
              pytest.mark.timeout(60)]


def _optimizers(kind):
    fp = [flow.nn.Parameter(flow.zeros(2)), flow.nn.Parameter(flow.zeros(1))]
    tp = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))]
    if kind == "sgd":
        f = flow.optim.SGD([{"params": [fp[0]]}, {"params": [fp[1]], "lr": 0.5}], lr=0.1,
                           momentum=0.9)
        t = torch.optim.SGD([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.5}], lr=0.1,
                            momentum=0.9)
    else:
        f = flow.optim.Adam([{"params": [fp[0]]}, {"params": [fp[1]]}], lr=0.1)
        t = torch.optim.Adam([{"params": [tp[0]]}, {"params": [tp[1]]}], lr=0.1)
    return f, t


def _run(fsch, tsch, fopt, topt, steps):
    key = "betas" if "betas" in topt.defaults else "momentum"
    for _ in range(steps):
        np.testing.assert_allclose(fsch.get_last_lr(), tsch.get_last_lr(), rtol=1e-12)
        for fg, tg in zip(fopt.param_groups, topt.param_groups):
            np.testing.assert_allclose(fg["lr"], tg["lr"], rtol=1e-12)
            np.testing.assert_allclose(np.asarray(fg[key]), np.asarray(tg[key]), rtol=1e-12)
        fopt.step()
        topt.step()
        fsch.step()
        tsch.step()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("kw", [dict(), dict(anneal_strategy="linear"), dict(three_phase=True),
                                dict(three_phase=True, pct_start=0.4, div_factor=10.0,
                                     final_div_factor=100.0, anneal_strategy="linear")])
def test_one_cycle_matches_torch(kind, kw):
    fopt, topt = _optimizers(kind)
    max_lr = [1.0, 0.3]
    fsch = flow.optim.lr_scheduler.OneCycleLR(fopt, max_lr, total_steps=20, **kw)
    tsch = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr, total_steps=20, **kw)
    _run(fsch, tsch, fopt, topt, 20)
    with pytest.raises(ValueError, match="total steps is 20"):
        fsch.step()


def test_one_cycle_epochs_and_errors():
    fopt, topt = _optimizers("sgd")
    fsch = flow.optim.lr_scheduler.OneCycleLR(fopt, 0.2, epochs=3, steps_per_epoch=4,
                                              cycle_momentum=False)
    tsch = torch.optim.lr_scheduler.OneCycleLR(topt, 0.2, epochs=3, steps_per_epoch=4,
                                               cycle_momentum=False)
    _run(fsch, tsch, fopt, topt, 12)
    with pytest.raises(ValueError, match="total_steps OR"):
        flow.optim.lr_scheduler.OneCycleLR(fopt, 0.2)
    with pytest.raises(ValueError, match="pct_start"):
        flow.optim.lr_scheduler.OneCycleLR(fopt, 0.2, total_steps=5, pct_start=2)
    with pytest.raises(ValueError, match="anneal_strategy"):
        flow.optim.lr_scheduler.OneCycleLR(fopt, 0.2, total_steps=5, anneal_strategy="x")
    with pytest.raises(ValueError, match="one per param group"):
        flow.optim.lr_scheduler.OneCycleLR(fopt, [0.2], total_steps=5)
    p = flow.nn.Parameter(flow.zeros(1))
    with pytest.raises(ValueError, match="momentum or beta1"):
        flow.optim.lr_scheduler.CyclicLR(flow.optim.Adagrad([p]), 0.1, 1.0)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("kw", [dict(mode="triangular"),
                                dict(mode="triangular2", step_size_down=2),
                                dict(mode="exp_range", gamma=0.9),
                                dict(scale_fn=lambda x: 0.5 ** x, scale_mode="iterations"),
                                dict(scale_fn=lambda x: 1.0 / x, scale_mode="cycle",
                                     cycle_momentum=False)])
def test_cyclic_matches_torch(kind, kw):
    fopt, topt = _optimizers(kind)
    args = ([0.01, 0.02], [0.5, 0.1])
    fsch = flow.optim.lr_scheduler.CyclicLR(fopt, *args, step_size_up=3, **kw)
    tsch = torch.optim.lr_scheduler.CyclicLR(topt, *args, step_size_up=3, **kw)
    _run(fsch, tsch, fopt, topt, 25)


def test_cyclic_state_dict_resumes():
    fopt, _ = _optimizers("sgd")
    sch = flow.optim.lr_scheduler.CyclicLR(fopt, 0.01, 0.5, step_size_up=3)
    for _ in range(4):
        sch.step()
    state = sch.state_dict()
    fopt2, _ = _optimizers("sgd")
    sch2 = flow.optim.lr_scheduler.CyclicLR(fopt2, 0.01, 0.5, step_size_up=3)
    sch2.load_state_dict(state)
    sch.step()
    sch2.step()
    assert sch.get_last_lr() == sch2.get_last_lr()
    assert sch.get_lr(0.01, 2) == pytest.approx(0.01 + (0.5 - 0.01) * 2 / 3)
