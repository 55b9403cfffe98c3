"""LR schedulers: learning-rate sequences vs torch.optim.lr_scheduler, OneFlow-only schedulers
vs their formulas, state dicts."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import actorflow as flow
from actorflow.optim import lr_scheduler as S

N = 20


def _opt(lrs=(0.1,), cls=flow.optim.SGD):
    groups = [{"params": [flow.tensor(np.ones(2, np.float32), requires_grad=True)], "lr": lr}
              for lr in lrs]
    return cls(groups, lr=lrs[0])


def _sequence(sched, n=N):
    lrs = [sched.get_last_lr()]
    for _ in range(n):
        sched.step()
        lrs.append(sched.get_last_lr())
    return np.array(lrs)


def _torch_sequence(make, lrs, n=N):
    torch = pytest.importorskip("torch")
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    opt = torch.optim.SGD(groups, lr=lrs[0])
    sched = make(torch.optim.lr_scheduler, opt)
    out = [sched.get_last_lr()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            opt.step()
            sched.step()
            out.append(sched.get_last_lr())
    return np.array(out)


CASES = {
    "step": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3),
    "exponential": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "cosine": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    "linear": lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=8),
    "constant": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=4),
    "lambda": lambda m, o: m.LambdaLR(o, lr_lambda=lambda s: 1.0 / (1 + s)),
    "lambda_per_group": lambda m, o: m.LambdaLR(o, [lambda s: 0.9 ** s, lambda s: 1 + s % 3]),
    "multiplicative": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda s: 0.95),
    "warm_restarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4, eta_min=0.001),
    "warm_restarts_mult": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vs_torch(name):
    lrs = (0.1, 0.03)
    ours = _sequence(CASES[name](S, _opt(lrs)))
    ref = _torch_sequence(CASES[name], lrs)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-10)


def test_polynomial_vs_torch():
    ours = _sequence(S.PolynomialLR(_opt(), total_iters=8, power=2.0, end_learning_rate=0.0))
    ref = _torch_sequence(lambda m, o: m.PolynomialLR(o, total_iters=8, power=2.0), (0.1,))
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-12)


def test_sequential_vs_torch():
    def make(m, o):
        return m.SequentialLR(o, [m.ConstantLR(o, factor=0.5, total_iters=2),
                                  m.ExponentialLR(o, gamma=0.8)], milestones=[4])

    def ours_make(m, o):
        return m.SequentialLR(o, [m.ConstantLR(o, factor=0.5, total_iters=2),
                                  m.ExponentialLR(o, gamma=0.8)], milestones=[4],
                              interval_rescaling=True)
    np.testing.assert_allclose(_sequence(ours_make(S, _opt())), _torch_sequence(make, (0.1,)),
                               rtol=1e-6)


def test_chained_vs_torch():
    def make(m, o):
        return m.ChainedScheduler([m.ConstantLR(o, factor=0.1, total_iters=3),
                                   m.ExponentialLR(o, gamma=0.9)])
    np.testing.assert_allclose(_sequence(make(S, _opt((1.0,)))), _torch_sequence(make, (1.0,)),
                               rtol=1e-6)


@pytest.mark.parametrize("kwargs", [
    dict(mode="min", factor=0.5, patience=2, threshold=1e-3, threshold_mode="rel", cooldown=1),
    dict(mode="max", factor=0.3, patience=1, threshold=1e-2, threshold_mode="abs", min_lr=0.01),
])
def test_reduce_on_plateau_vs_torch(kwargs):
    torch = pytest.importorskip("torch")
    metrics = np.random.default_rng(0).uniform(0, 1, 25)
    ours = S.ReduceLROnPlateau(_opt(), **kwargs)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    ref = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kwargs)
    for v in metrics:
        ours.step(v)
        ref.step(v)
        assert ours.get_last_lr() == pytest.approx(ref.get_last_lr())


# ---- OneFlow-only schedulers vs formulas -------------------------------------------------------

def test_cosine_decay_formula():
    got = _sequence(S.CosineDecayLR(_opt((1.0,)), decay_steps=10, alpha=0.2))[:, 0]
    want = [(0.8 * 0.5 * (1 + math.cos(math.pi * s / 10)) + 0.2) if s < 10 else 0.2
            for s in range(N + 1)]
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("cycle", [False, True])
def test_polynomial_formula(cycle):
    base, end, power, decay = 0.5, 0.01, 1.5, 6
    got = _sequence(S.PolynomialLR(_opt((base,)), decay, end, power, cycle))[:, 0]
    want = []
    for s in range(N + 1):
        d = decay
        if cycle:
            s = max(s, 1)
            d = decay * math.ceil(s / decay)
        s = min(s, d)
        want.append((base - end) * (1 - s / d) ** power + end)
    np.testing.assert_allclose(got, want)


def test_warm_restarts_decay_and_limit():
    got = _sequence(S.CosineAnnealingWarmRestarts(_opt((0.1,)), T_0=2, T_mult=2, eta_min=0.01,
                                                  decay_rate=0.5, restart_limit=2))[:, 0]
    starts, want = [(0, 2, 0), (2, 4, 1)], []
    for s in range(N + 1):
        for start, period, cycle in starts:
            if start <= s < start + period:
                peak = 0.1 * 0.5 ** cycle
                want.append(0.01 + (peak - 0.01) * 0.5 * (1 + math.cos(math.pi * (s - start)
                                                                      / period)))
                break
        else:
            want.append(0.01)
    np.testing.assert_allclose(got, want)


def test_warmup_wrapping_an_optimizer():
    opt = _opt((0.001,))
    got = _sequence(S.WarmupLR(opt, warmup_factor=0.5, warmup_iters=5), 8)[:, 0]
    np.testing.assert_allclose(got, [0.0005, 0.0006, 0.0007, 0.0008, 0.0009] + [0.001] * 4)
    got = _sequence(S.WarmUpLR(_opt((0.2,)), warmup_factor=0.1, warmup_iters=3,
                               warmup_method="constant"), 5)[:, 0]
    np.testing.assert_allclose(got, [0.02, 0.02, 0.02, 0.2, 0.2, 0.2])


@pytest.mark.parametrize("prefix", [False, True])
def test_linear_warmup_then_exponential(prefix):
    opt = _opt((0.1,))
    warm = S.WarmupLR(S.ExponentialLR(opt, gamma=0.9), warmup_factor=0.5, warmup_iters=5,
                      warmup_prefix=prefix)
    got = _sequence(warm, 9)[:, 0]
    end = 1.0 if prefix else 0.9 ** 5
    want = [0.1 * (0.5 + (end - 0.5) * s / 5) for s in range(5)]
    want += [0.1 * 0.9 ** (s - 5 if prefix else s) for s in range(5, 10)]
    np.testing.assert_allclose(got, want)
    assert opt.param_groups[0]["lr"] == pytest.approx(want[-1])


def test_warmup_errors():
    opt = _opt()
    with pytest.raises(ValueError, match="warmup_method"):
        S.WarmupLR(opt, warmup_method="cubic")
    with pytest.raises(ValueError, match="warmup_iters"):
        S.WarmupLR(opt, warmup_iters=0)
    with pytest.raises(ValueError, match="different learning rates"):
        S.WarmupLR(S.ExponentialLR(_opt((0.1, 0.2)), gamma=0.9))


# ---- base class behaviour -----------------------------------------------------------------------

def test_initial_lr_group_lr_and_resume():
    opt = _opt((0.1, 0.01))
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.01]
    for _ in range(3):
        sched.step()
    assert sched.last_step == sched.last_epoch == 3
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.05, 0.005])
    assert sched.get_last_lr() == pytest.approx([0.05, 0.005])
    resumed = S.StepLR(opt, step_size=2, gamma=0.5, last_step=3)  # resumes at step 4
    assert resumed.get_last_lr() == pytest.approx([0.025, 0.0025])
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(_opt(), step_size=2, last_step=3)
    with pytest.raises(TypeError, match="not an Optimizer"):
        S.StepLR(object(), step_size=2)


def test_state_dict_round_trip(tmp_path):
    def make(opt):
        return S.WarmupLR(S.CosineAnnealingLR(opt, T_max=12), warmup_factor=0.1, warmup_iters=4)

    straight = make(_opt())
    ref = _sequence(straight, 15)

    opt = _opt()
    sched = make(opt)
    got = [sched.get_last_lr()]
    for i in range(15):
        sched.step()
        got.append(sched.get_last_lr())
        if i == 6:
            flow.save(sched.state_dict(), str(tmp_path / "s.ckpt"))
            opt = _opt()
            sched = S.WarmupLR(S.CosineAnnealingLR(opt, T_max=50), warmup_factor=0.5,
                               warmup_iters=2)
            sched.load_state_dict(flow.load(str(tmp_path / "s.ckpt")))
            assert sched.schedulers[1].T_max == 12 and sched.warmup_iters == 4
    np.testing.assert_allclose(np.array(got), ref)


def test_lambda_state_dict_skips_functions():
    class Scale:
        def __init__(self):
            self.k = 0.5

        def __call__(self, s):
            return self.k ** s

    sched = S.LambdaLR(_opt((0.1, 0.2)), [lambda s: 1.0, Scale()])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [None, {"k": 0.5}]
    other = S.LambdaLR(_opt((0.1, 0.2)), [lambda s: 1.0, Scale()])
    other.lr_lambdas[1].k = 0.9
    other.load_state_dict(sd)
    assert other.lr_lambdas[1].k == 0.5
