"""L-BFGS (issue #16): the fixed-step path against PyTorch's L-BFGS (the same two-loop
recursion), the strong-Wolfe path converging on a quadratic, state_dict round trip."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch

RNG = np.random.default_rng(11)


def _problem():
    a = RNG.standard_normal((6, 6))
    return a @ a.T + 6 * np.eye(6), RNG.standard_normal(6)


def _run_flow(h, b, x0, steps, **kw):
    x = flow.nn.Parameter(flow.tensor(x0))
    opt = flow.optim.LBFGS([x], **kw)
    H, B = flow.tensor(h), flow.tensor(b)

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x * flow.matmul(H, x)).sum() - (B * x).sum()
        loss.backward()
        return loss

    for _ in range(steps):
        opt.step(closure)
    return x, opt, closure


def test_lbfgs_fixed_step_matches_torch():
    h, b = _problem()
    x0 = RNG.standard_normal(6)
    x, _, _ = _run_flow(h, b, x0, 3, lr=0.1, max_iter=7, history_size=4)
    tx = torch.nn.Parameter(torch.tensor(x0))
    topt = torch.optim.LBFGS([tx], lr=0.1, max_iter=7, history_size=4)
    H, B = torch.tensor(h), torch.tensor(b)

    def tclosure():
        topt.zero_grad()
        loss = 0.5 * (tx * (H @ tx)).sum() - (B * tx).sum()
        loss.backward()
        return loss

    for _ in range(3):
        topt.step(tclosure)
    np.testing.assert_allclose(x.numpy(), tx.detach().numpy(), rtol=1e-8, atol=1e-10)


def test_lbfgs_strong_wolfe_converges_and_reloads():
    h, b = _problem()
    x, opt, closure = _run_flow(h, b, np.zeros(6), 2, lr=1.0, max_iter=30,
                                line_search_fn="strong_wolfe")
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(h, b), rtol=1e-4, atol=1e-6)
    sd = opt.state_dict()
    again = flow.optim.LBFGS([x], lr=1.0, line_search_fn="strong_wolfe")
    again.load_state_dict(sd)
    st = again.state[x]
    assert st["n_iter"] == opt.state[x]["n_iter"] and len(st["old_diffs"]) > 0
    assert st["d"] is not opt.state[x]["d"]
    with pytest.raises(ValueError, match="closure"):
        again.step()


def test_set_default_tensor_type():
    try:
        flow.set_default_tensor_type(flow.DoubleTensor)
        assert flow.tensor([1.0]).dtype == flow.float64
        flow.set_default_tensor_type("torch.FloatTensor")
        assert flow.zeros(2).dtype == flow.float32
        with pytest.raises(TypeError, match="typed tensor"):
            flow.set_default_tensor_type(flow.float64)
    finally:
        flow.set_default_dtype(flow.float32)
