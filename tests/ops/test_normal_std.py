"""flow.normal refuses a negative std given as a tensor (or as a number beside a tensor mean),
as torch.normal does, instead of drawing mirrored values."""
import pytest
import torch

import actorflow as flow

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("std", [[-1.0, 1.0], [0.5, -0.0001]])
def test_tensor_std_below_zero_raises(std):
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(2), torch.tensor(std))
    with pytest.raises(RuntimeError, match="normal: expects all elements of std >= 0"):
        flow.normal(flow.zeros(2), flow.tensor(std))
    with pytest.raises(RuntimeError, match="std >= 0"):
        flow.normal(0.0, flow.tensor(std))


def test_number_std_below_zero_with_tensor_mean_raises():
    with pytest.raises(RuntimeError, match="got std -2.0"):
        flow.normal(flow.zeros(3), -2.0)


def test_zero_and_positive_std_draw():
    out = flow.normal(flow.full((1000,), 3.0), flow.tensor([0.0] * 500 + [1.0] * 500))
    a = out.numpy()
    assert (a[:500] == 3.0).all() and abs(a[500:].mean() - 3.0) < 0.3
