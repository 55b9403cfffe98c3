"""nn.utils.prune against PyTorch's torch.nn.utils.prune (deterministic methods)."""
import numpy as np
import pytest

import actorflow as flow
from actorflow import nn
from actorflow.nn.utils import prune
from tests.helpers import torch

if torch is not None:
    import torch.nn.utils.prune  # noqa: F401  (not imported by torch.nn.utils itself)

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def _pair(shape, seed=0):
    w = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    m = nn.Linear(shape[1], shape[0])
    m.weight = nn.Parameter(flow.tensor(w))
    tm = torch.nn.Linear(shape[1], shape[0])
    tm.weight = torch.nn.Parameter(torch.tensor(w))
    tm.bias = torch.nn.Parameter(torch.tensor(m.bias.numpy()))
    return m, tm


@needs_torch
@pytest.mark.parametrize("amount", [3, 0.4, 0])
def test_l1_then_ln_structured_like_torch(amount):
    m, tm = _pair((6, 5))
    prune.l1_unstructured(m, "weight", amount=amount)
    torch.nn.utils.prune.l1_unstructured(tm, "weight", amount=amount)
    np.testing.assert_array_equal(m.weight_mask.numpy(), tm.weight_mask.numpy())
    prune.ln_structured(m, "weight", amount=2, n=2, dim=0)
    torch.nn.utils.prune.ln_structured(tm, "weight", amount=2, n=2, dim=0)
    np.testing.assert_array_equal(m.weight_mask.numpy(), tm.weight_mask.numpy())
    prune.ln_structured(m, "weight", amount=0.5, n=float("inf"), dim=-1)
    torch.nn.utils.prune.ln_structured(tm, "weight", amount=0.5, n=float("inf"), dim=-1)
    np.testing.assert_array_equal(m.weight_mask.numpy(), tm.weight_mask.numpy())
    assert isinstance(next(iter(m._forward_pre_hooks.values())), prune.PruningContainer)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(m(flow.tensor(x)).numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


@needs_torch
def test_global_unstructured_and_remove_like_torch():
    m, tm = _pair((4, 3), seed=2)
    n, tn = _pair((2, 3), seed=3)
    prune.global_unstructured([(m, "weight"), (n, "weight")],
                              pruning_method=prune.L1Unstructured, amount=5)
    torch.nn.utils.prune.global_unstructured([(tm, "weight"), (tn, "weight")],
                                             pruning_method=torch.nn.utils.prune.L1Unstructured,
                                             amount=5)
    for a, b in ((m, tm), (n, tn)):
        np.testing.assert_array_equal(a.weight.numpy(), b.weight.detach().numpy())
        pid = id(a.weight_orig)
        prune.remove(a, "weight")
        assert id(a.weight) == pid and "weight" in dict(a.named_parameters())
        assert "weight_mask" not in dict(a.named_buffers()) and not prune.is_pruned(a)
        np.testing.assert_array_equal(a.weight.numpy(), b.weight.detach().numpy())


def test_mask_gates_the_gradient_and_rollback():
    m = nn.Linear(3, 2)
    mask = flow.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    prune.custom_from_mask(m, "weight", mask)
    m(flow.ones(4, 3)).sum().backward()
    np.testing.assert_array_equal(m.weight_orig.grad.numpy(), 4 * mask.numpy())
    with pytest.raises(ValueError, match="pruned before"):
        prune.remove(m, "bias")
    with pytest.raises(ValueError, match="amount=5 is larger"):
        prune.l1_unstructured(m, "bias", amount=5)
    assert "bias" in dict(m.named_parameters()) and "bias_orig" not in dict(m.named_parameters())
    with pytest.raises(ValueError, match="at least 2 dims"):
        prune.ln_structured(m, "bias", amount=1, n=1, dim=0)


def test_random_methods_prune_the_requested_counts():
    flow.manual_seed(0)
    t = flow.randn(5, 4, 6)
    mask = prune.RandomUnstructured(amount=0.25).compute_mask(t, flow.ones_like(t))
    assert int((mask == 0).sum()) == 30
    mask = prune.RandomStructured(amount=2, dim=1).compute_mask(t, flow.ones_like(t))
    per_channel = (mask == 0).sum(dim=[0, 2]).numpy()
    assert sorted(per_channel.tolist()) == [0, 0, 30, 30]
    with pytest.raises(TypeError):
        prune.L1Unstructured(amount="a lot")
    with pytest.raises(ValueError):
        prune.L1Unstructured(amount=1.5)
