"""flow.distributions.Categorical vs torch.distributions.Categorical (float64): normalised
probs/logits, log_prob (with broadcasting) and its gradient, entropy, mode, enumerate_support;
sampling reproducible under flow.manual_seed with frequencies matching the probabilities."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.distributions import Categorical, Distribution
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(torch is None, reason="needs PyTorch"),
              pytest.mark.timeout(60)]

P = np.array([[0.1, 0.2, 0.7, 0.0], [1.0, 2.0, 3.0, 4.0]])
L = np.array([[0.3, -1.0, 2.0, 0.5], [-50.0, 0.0, 1.0, 1.0]])


@pytest.mark.parametrize("by", ["probs", "logits"])
def test_matches_torch(by):
    arr = P if by == "probs" else L
    fp = flow.tensor(arr, requires_grad=True)
    tp = torch.tensor(arr, requires_grad=True)
    f = Categorical(**{by: fp})
    t = torch.distributions.Categorical(**{by: tp})
    assert tuple(f.batch_shape) == tuple(t.batch_shape) and tuple(f.event_shape) == ()
    assert tuple(f.param_shape) == tuple(t.param_shape)
    for name in ("probs", "logits", "entropy", "mode"):
        fv = getattr(f, name)
        tv = getattr(t, name)
        fv, tv = (fv(), tv()) if callable(tv) else (fv, tv)
        np.testing.assert_allclose(fv.detach().numpy(), tv.detach().numpy(), atol=1e-12)
    assert np.isnan(f.mean.numpy()).all() and tuple(f.variance.shape) == (2,)
    value = np.array([[2, 1], [0, 3], [3, 3]])  # broadcast against the batch of 2
    fl = f.log_prob(flow.tensor(value))
    tl = t.log_prob(torch.tensor(value))
    np.testing.assert_allclose(fl.detach().numpy(), tl.detach().numpy(), atol=1e-12)
    g = np.random.default_rng(0).standard_normal(value.shape)
    loss_f = (fl * flow.tensor(g)).sum() + f.entropy().sum()
    loss_t = (tl * torch.tensor(g)).sum() + t.entropy().sum()
    loss_f.backward()
    loss_t.backward()
    np.testing.assert_allclose(fp.grad.numpy(), tp.grad.numpy(), atol=1e-10)
    np.testing.assert_array_equal(f.enumerate_support().numpy(), t.enumerate_support().numpy())
    np.testing.assert_array_equal(f.enumerate_support(False).numpy(),
                                  t.enumerate_support(False).numpy())


def test_sample_seeded_and_distributed_as_probs():
    c = Categorical(probs=flow.tensor(P))
    flow.manual_seed(3)
    a = c.sample((5000,))
    flow.manual_seed(3)
    b = c.sample((5000,))
    assert a.dtype is flow.int64 and tuple(a.shape) == (5000, 2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    want = P / P.sum(-1, keepdims=True)
    for j in range(2):
        freq = np.bincount(a.numpy()[:, j], minlength=4) / 5000
        np.testing.assert_allclose(freq, want[j], atol=0.03)
    assert not (a.numpy()[:, 0] == 3).any()  # a zero probability is never drawn
    one = Categorical(logits=flow.tensor([0.0, 0.0]))
    assert tuple(one.sample().shape) == () and tuple(one.sample((2, 3)).shape) == (2, 3)
    assert tuple(one.sample_n(4).shape) == (4,)


def test_errors():
    with pytest.raises(ValueError, match="not both"):
        Categorical()
    with pytest.raises(ValueError, match="not both"):
        Categorical(probs=flow.ones(2), logits=flow.ones(2))
    with pytest.raises(ValueError, match="one-dimensional"):
        Categorical(probs=flow.tensor(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        Categorical(probs=flow.tensor([0.5, -0.1]))
    c = Categorical(probs=flow.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"integers in \[0, 2\)"):
        c.log_prob(flow.tensor([2]))
    with pytest.raises(NotImplementedError, match="Categorical does not implement rsample"):
        c.rsample()
    with pytest.raises(NotImplementedError, match="Distribution does not implement log_prob"):
        Distribution((2,)).log_prob(flow.zeros(2))
