"""benchmarks/graph_vs_torch.py compares like with like: its PyTorch copies of issue #17's
models start from the actorflow weights and compute the same losses, before and after an SGD
momentum step (torch.compile is not run here: it takes tens of seconds)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.graph_profile import make_eager
from benchmarks.graph_vs_torch import (MODELS, check_same_loss, copy_weights, torch_model,
                                       torch_step)

torch = pytest.importorskip("torch")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("key", ["mlp", "cnn", "gpt"])
def test_torch_copy_computes_the_same_steps(key):
    model, x, y, step = make_eager(MODELS[key][1])
    t_step = torch_step(key, model, x.numpy(), y.numpy())
    for _ in range(2):   # the first loss checks the forward, the second the update too
        a, t = step().item(), t_step().item()
        np.testing.assert_allclose(t, a, rtol=1e-4)
        check_same_loss(key, a, t)


def test_a_different_loss_is_reported():
    with pytest.raises(AssertionError, match="first-step loss actorflow 2.0 vs PyTorch 2.01"):
        check_same_loss("mlp", 2.0, 2.01)


def test_copy_weights_checks_shapes():
    model, *_ = make_eager(MODELS["mlp"][1])
    tm = torch_model("mlp")
    tm[0] = torch.nn.Linear(784, 512)
    with pytest.raises(RuntimeError, match=r"0.weight has shape \(1024, 784\) in actorflow"):
        copy_weights("mlp", model, tm)
