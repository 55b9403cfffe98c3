"""Tensor.uniform_/normal_/exponential_/cauchy_/log_normal_/geometric_/random_/bernoulli_:
empirical quantiles against each distribution's inverse CDF, ranges, seeding, dtypes, errors."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow

N = 200_000
Q = np.array([0.1, 0.25, 0.5, 0.75, 0.9])


def _fill(method: str, *args, dtype=flow.float32, **kw) -> np.ndarray:
    x = flow.empty(N, dtype=dtype)
    out = getattr(x, method)(*args, **kw)
    assert out is x  # in place, returns the tensor
    return x.numpy().astype(np.float64)


@pytest.mark.parametrize("method,args,inv_cdf", [
    ("uniform_", (-2.0, 3.0), lambda q: -2 + 5 * q),
    ("exponential_", (2.0,), lambda q: -np.log1p(-q) / 2.0),
    ("cauchy_", (1.0, 0.5), lambda q: 1.0 + 0.5 * np.tan(np.pi * (q - 0.5))),
    ("log_normal_", (0.5, 0.25),
     lambda q: np.exp(0.5 + 0.25 * np.array([-1.2815516, -0.6744898, 0.0, 0.6744898,
                                              1.2815516]))),
    ("normal_", (1.0, 2.0),
     lambda q: 1.0 + 2.0 * np.array([-1.2815516, -0.6744898, 0.0, 0.6744898, 1.2815516])),
])
def test_continuous_quantiles(method, args, inv_cdf):
    v = _fill(method, *args)
    want = inv_cdf(Q)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(np.quantile(v, Q), want, atol=0.02 * scale)


def test_exponential_is_positive_and_uniform_in_range():
    assert _fill("exponential_", 0.5).min() >= 0
    v = _fill("uniform_", 3.0, 3.5, dtype=flow.float64)
    assert v.min() >= 3.0 and v.max() < 3.5


def test_geometric_pmf():
    p = 0.3
    v = _fill("geometric_", p)
    assert v.min() >= 1 and np.all(v == np.round(v))
    for k in (1, 2, 3, 5):
        assert abs(np.mean(v == k) - (1 - p) ** (k - 1) * p) < 0.005


def test_random_ranges():
    v = _fill("random_", 3, 7)
    assert set(np.unique(v)) == {3, 4, 5, 6}
    v = _fill("random_", 4)  # random_(to)
    assert set(np.unique(v)) == {0, 1, 2, 3}
    b = flow.empty(1000, dtype=flow.bool).random_().numpy()
    assert b.any() and not b.all()
    i8 = flow.empty(N, dtype=flow.int8).random_().numpy()
    assert i8.min() >= 0 and i8.max() == 127
    f = flow.empty(1000).random_(**{"from": -3, "to": -1}).numpy()
    assert set(np.unique(f)) == {-3, -2}


def test_bernoulli_scalar_and_tensor_p():
    v = _fill("bernoulli_", 0.2)
    assert set(np.unique(v)) == {0, 1} and abs(v.mean() - 0.2) < 0.01
    p = flow.tensor([[0.0], [1.0], [0.5]])
    x = flow.empty(3, 10000).bernoulli_(p).numpy()
    assert x[0].sum() == 0 and x[1].all() and abs(x[2].mean() - 0.5) < 0.03


@pytest.mark.parametrize("method,args", [("uniform_", ()), ("normal_", ()),
                                         ("exponential_", ()), ("geometric_", (0.5,)),
                                         ("random_", (0, 9)), ("bernoulli_", ())])
def test_seeded_generator_and_dtype(method, args):
    g1, g2 = flow.Generator(), flow.Generator()
    g1.manual_seed(5)
    g2.manual_seed(5)
    a = getattr(flow.empty(50, dtype=flow.float64), method)(*args, generator=g1)
    b = getattr(flow.empty(50, dtype=flow.float64), method)(*args, generator=g2)
    assert a.dtype == flow.float64
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    flow.manual_seed(9)
    c = getattr(flow.empty(50), method)(*args).numpy()
    flow.manual_seed(9)
    d = getattr(flow.empty(50), method)(*args).numpy()
    np.testing.assert_array_equal(c, d)
    h = getattr(flow.empty(50, dtype=flow.float16), method)(*args)
    assert h.dtype == flow.float16


def test_fill_of_a_parameter_records_no_history():
    w = flow.nn.Parameter(flow.zeros(4, 3))
    w.uniform_(-1, 1)
    assert w.grad_fn is None and w.requires_grad and w.is_leaf
    (w * 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2.0)
    assert flow._C.exponential_(flow.empty(3), 1.0).numpy().min() >= 0


def test_errors_name_the_method():
    x = flow.empty(3)
    with pytest.raises(ValueError, match="exponential_: lambd must be positive"):
        x.exponential_(0.0)
    with pytest.raises(ValueError, match=r"geometric_: p must be in \(0, 1\)"):
        x.geometric_(1.5)
    with pytest.raises(ValueError, match="random_: expected from < to"):
        x.random_(5, 5)
    with pytest.raises(ValueError, match="uniform_: expected a <= b"):
        x.uniform_(2, 1)
    with pytest.raises(ValueError, match="bernoulli_: p must be in"):
        x.bernoulli_(2.0)
