"""combined_margin_loss / nn.CombinedMarginLoss against NumPy; gradients by finite
differences (float64)."""
import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck


@pytest.mark.parametrize("m1,m2,m3", [(1.0, 0.0, 0.0), (1.0, 0.0, 0.35), (1.0, 0.5, 0.0),
                                      (0.3, 0.5, 0.4), (2.0, 0.0, 0.0)])
def test_combined_margin_loss(m1, m2, m3):
    rng = np.random.default_rng(0)
    x = rng.uniform(-0.9, 0.9, (6, 5))
    label = rng.integers(0, 5, 6)
    want = x.copy()
    rows = np.arange(6)
    if (m1, m2) == (1.0, 0.0):
        want[rows, label] -= m3
    else:
        want[rows, label] = np.cos(m1 * np.arccos(x[rows, label]) + m2) - m3
    out = flow.nn.CombinedMarginLoss(m1, m2, m3)(flow.tensor(x), flow.tensor(label,
                                                                             dtype=flow.int32))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    gradcheck(lambda t: flow.nn.functional.combined_margin_loss(t, flow.tensor(label),
                                                                m1, m2, m3), x)
