"""The benchmarks' hand-written NumPy GPT step matches actorflow: loss, every gradient, and the
parameters after a few AdamW steps."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
from benchmarks.numpy_gpt import NumpyGPT, gelu_forward
from examples.gpt import GPT

V, BLOCK, LAYERS, HEADS, EMBD = 20, 8, 2, 2, 16


def _model(tie_weights: bool = True) -> GPT:
    flow.manual_seed(0)
    return GPT(V, BLOCK, LAYERS, HEADS, EMBD, tie_weights=tie_weights)


def _batch(B: int = 3, T: int = BLOCK, seed: int = 1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


@pytest.mark.parametrize("tie_weights,T", [(True, BLOCK), (True, 5), (False, BLOCK)])
def test_loss_and_grads_match_actorflow(tie_weights, T):
    model = _model(tie_weights)
    ref = NumpyGPT.from_state_dict(model.state_dict(), HEADS)
    x, y = _batch(T=T)
    _, loss = model(flow.from_numpy(x), flow.from_numpy(y))
    loss.backward()
    np_loss, grads = ref.loss_and_grads(x, y)
    np.testing.assert_allclose(np_loss, loss.item(), rtol=1e-5)
    names = dict(model.named_parameters())
    assert set(grads) == set(names)
    for name, p in names.items():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_adamw_steps_match_actorflow():
    model = _model()
    hyper = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)
    opt = flow.optim.AdamW(model.parameters(), **hyper)
    ref = NumpyGPT.from_state_dict(model.state_dict(), HEADS, **hyper)
    for step in range(3):
        x, y = _batch(seed=10 + step)
        _, loss = model(flow.from_numpy(x), flow.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        np.testing.assert_allclose(ref.step(x, y), loss.item(), rtol=1e-5)
    for name, p in model.named_parameters():
        got, want = ref.params[name], p.numpy()
        if name.endswith("attn.qkv.bias"):
            # the key bias adds a constant to each softmax row, so its gradient is only
            # rounding noise (~1e-9), which Adam's normalisation turns into steps of up to lr
            # in either direction: only its bound is checked
            k = slice(EMBD, 2 * EMBD)
            assert np.abs(got[k] - want[k]).max() <= 2 * 3 * hyper["lr"]
            got, want = np.delete(got, np.r_[k]), np.delete(want, np.r_[k])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def test_adamw_defaults_are_actorflows():
    ref = NumpyGPT.from_state_dict(_model().state_dict(), HEADS)
    group = flow.optim.AdamW(_model().parameters()).param_groups[0]
    assert (ref.lr, ref.betas, ref.eps, ref.weight_decay) == (
        group["lr"], tuple(group["betas"]), group["eps"], group["weight_decay"])


def test_gelu_matches_erf():
    u = np.linspace(-9, 9, 20001).astype(np.float32)
    out, cdf, e = (np.empty_like(u) for _ in range(3))
    gelu_forward(u, out, cdf, e)
    exact_cdf = np.array([0.5 * (1 + math.erf(float(v) / math.sqrt(2))) for v in u])
    # A&S 7.1.26 is within 7.5e-8 of Phi; float32 rounding adds a few units of 3e-8
    assert np.abs(cdf - exact_cdf).max() < 3e-7
    np.testing.assert_allclose(out, u * exact_cdf, rtol=1e-6, atol=3e-7)
    # exp(-u^2/2) inherits the float32 rounding of u^2 (relative 6e-8 of up to 40)
    np.testing.assert_allclose(e, np.exp(-0.5 * u.astype(np.float64) ** 2), rtol=5e-6,
                               atol=1e-30)


def test_bad_inputs_raise():
    ref = NumpyGPT.from_state_dict(_model().state_dict(), HEADS)
    x, y = _batch()
    with pytest.raises(ValueError, match="outside"):
        ref.loss_and_grads(x + V, y)
    with pytest.raises(ValueError, match="block_size"):
        ref.loss_and_grads(np.zeros((2, BLOCK + 1), np.int64), np.zeros((2, BLOCK + 1), np.int64))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        ref.loss_and_grads(x, y[:, :4])
    with pytest.raises(ValueError, match="integer"):
        ref.loss_and_grads(x.astype(np.float32), y)
    with pytest.raises(ValueError, match="divisible"):
        NumpyGPT.from_state_dict(_model().state_dict(), 3)
    with pytest.raises(ValueError, match="not a GPT state dict"):
        NumpyGPT({"tok_emb.weight": np.zeros((V, EMBD))}, HEADS)
