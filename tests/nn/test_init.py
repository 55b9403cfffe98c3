"""nn.init: statistics, bounds, fan computation, gains, reproducibility, in-place writes."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.nn import init


def _values(t) -> np.ndarray:
    return t.detach().numpy().astype(np.float64)


def test_fan_in_and_fan_out():
    assert init._calculate_fan_in_and_fan_out(flow.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(flow.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(flow.empty(4))


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1.0
    assert init.calculate_gain("conv2d") == 1.0
    assert init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swishy")


def test_uniform_and_normal_statistics():
    t = flow.empty(200, 100)
    assert init.uniform_(t, -2.0, 3.0) is t
    v = _values(t)
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.05 and abs(v.std() - 5 / math.sqrt(12)) < 0.05
    init.normal_(t, mean=1.5, std=0.5)
    v = _values(t)
    assert abs(v.mean() - 1.5) < 0.02 and abs(v.std() - 0.5) < 0.02


def test_constant_ones_zeros_eye():
    t = flow.empty(3, 4)
    np.testing.assert_array_equal(init.constant_(t, 2.5).numpy(), np.full((3, 4), 2.5))
    np.testing.assert_array_equal(init.ones_(t).numpy(), 1)
    np.testing.assert_array_equal(init.zeros_(t).numpy(), 0)
    np.testing.assert_array_equal(init.eye_(t).numpy(), np.eye(3, 4))
    with pytest.raises(ValueError):
        init.eye_(flow.empty(2, 2, 2))


def test_xavier_bounds_and_std():
    t = flow.empty(300, 200)
    init.xavier_uniform_(t, gain=2.0)
    bound = 2.0 * math.sqrt(6 / 500)
    v = _values(t)
    assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
    assert abs(v.std() - bound / math.sqrt(3)) < 0.01 * bound / math.sqrt(3) * 5
    init.xavier_normal_(t)
    assert abs(_values(t).std() - math.sqrt(2 / 500)) < 0.02 * math.sqrt(2 / 500)


def test_kaiming_bounds_and_std():
    t = flow.empty(128, 64, 3, 3)  # fan_in 576, fan_out 1152
    init.kaiming_uniform_(t, a=math.sqrt(5))
    bound = math.sqrt(3) * math.sqrt(2 / 6) / math.sqrt(576)  # = 1 / sqrt(fan_in)
    v = _values(t)
    assert np.abs(v).max() <= bound and np.abs(v).max() > 0.99 * bound
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    std = math.sqrt(2) / math.sqrt(1152)
    assert abs(_values(t).std() - std) < 0.02 * std
    init.kaiming_uniform_(t, nonlinearity="relu")
    bound = math.sqrt(6 / 576)
    assert np.abs(_values(t)).max() <= bound
    with pytest.raises(ValueError, match="fan_avg"):
        init.kaiming_normal_(t, mode="fan_avg")


def test_trunc_normal():
    t = flow.empty(200, 100)
    init.trunc_normal_(t, mean=0.5, std=1.0, a=-0.5, b=1.0)
    v = _values(t)
    assert v.min() >= -0.5 and v.max() <= 1.0
    # mean of N(0.5, 1) truncated to [-0.5, 1]: 0.5 + (phi(-1) - phi(0.5)) / (Phi(0.5) - Phi(-1))
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    expected = 0.5 + (phi(-1) - phi(0.5)) / (cdf(0.5) - cdf(-1))
    assert abs(v.mean() - expected) < 0.02
    init.trunc_normal_(t, std=0.02)  # the common ViT/GPT use: bounds far outside
    assert abs(_values(t).std() - 0.02) < 0.001
    with pytest.raises(ValueError):
        init.trunc_normal_(t, a=1.0, b=0.0)


def test_seed_makes_init_reproducible():
    flow.manual_seed(123)
    a = nn.Linear(6, 5)
    flow.manual_seed(123)
    b = nn.Linear(6, 5)
    np.testing.assert_array_equal(_values(a.weight), _values(b.weight))
    np.testing.assert_array_equal(_values(a.bias), _values(b.bias))
    c = nn.Linear(6, 5)
    assert not np.array_equal(_values(a.weight), _values(c.weight))


def test_init_writes_in_place_and_keeps_parameter():
    lin = nn.Linear(4, 3)
    w = lin.weight
    version = w._version
    init.normal_(lin.weight)
    assert lin.weight is w and w.requires_grad and w.grad_fn is None
    assert w._version > version
    init.zeros_(lin.weight.double())  # a converted copy: the parameter is untouched
    assert np.any(_values(w) != 0)
    h = flow.empty(4, 4, dtype=flow.float64)
    init.uniform_(h)
    assert h.dtype == flow.float64


def test_layer_default_init_ranges():
    lin = nn.Linear(50, 40)
    bound = 1 / math.sqrt(50)
    assert np.abs(_values(lin.weight)).max() <= bound
    assert np.abs(_values(lin.bias)).max() <= bound
    conv = nn.Conv2d(4, 6, 3)
    bound = 1 / math.sqrt(36)
    assert np.abs(_values(conv.weight)).max() <= bound
    emb = nn.Embedding(300, 20, padding_idx=2)
    v = _values(emb.weight)
    assert np.all(v[2] == 0) and abs(v.std() - 1.0) < 0.05


def test_trunc_normal_inverse_cdf_matches_reference():
    torch = pytest.importorskip("torch")
    y = np.linspace(-0.999999, 0.999999, 2001)
    x = init._erfinv(flow.tensor(y)).numpy()
    np.testing.assert_allclose(x, torch.erfinv(torch.tensor(y)).numpy(), atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 5), (6, 2, 2), (4, 4)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    flow.manual_seed(0)
    w = flow.empty(*shape, dtype=flow.float64)
    assert init.orthogonal_(w, gain=2.0) is w
    m = _values(w).reshape(shape[0], -1)
    small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(small, 4.0 * np.eye(small.shape[0]), atol=1e-12)
    flow.manual_seed(0)
    again = init.orthogonal_(flow.empty(*shape, dtype=flow.float64), gain=2.0)
    np.testing.assert_array_equal(_values(again), _values(w))  # seeded
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(flow.empty(3))
