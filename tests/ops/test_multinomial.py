"""flow.multinomial (with and without replacement), Tensor.bernoulli on probabilities and
bernoulli_ with p: frequencies, reproducibility under flow.manual_seed and generators, eager
against nn.Graph, errors."""
import numpy as np
import pytest

import actorflow as flow


def test_with_replacement_follows_the_weights():
    flow.manual_seed(0)
    w = np.array([[1.0, 0.0, 6.0, 3.0], [1.0, 1.0, 1.0, 1.0]])
    s = flow.multinomial(flow.tensor(w), 20000, replacement=True)
    assert s.shape == (2, 20000) and s.dtype == flow.int64
    freq = np.stack([np.bincount(r, minlength=4) for r in s.numpy()]) / 20000
    np.testing.assert_allclose(freq, w / w.sum(1, keepdims=True), atol=0.015)
    assert (s.numpy()[0] != 1).all()  # a zero weight is never drawn
    one = flow.multinomial(flow.tensor([0.2, 0.8]), 5, True)
    assert one.shape == (5,)


def test_without_replacement_draws_distinct_categories_in_weight_order():
    flow.manual_seed(1)
    w = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    rows = np.tile(w, (4000, 1))
    s = flow.multinomial(flow.tensor(rows), 4).numpy()
    assert all(len(set(r)) == 4 for r in s) and (s != 4).all()
    np.testing.assert_allclose(np.bincount(s[:, 0], minlength=5) / 4000, w, atol=0.03)
    # the second draw: P(j second) = sum_i w_i * w_j / (1 - w_i)
    second = sum(w[i] * np.where(np.arange(5) == i, 0, w) / (1 - w[i]) for i in range(4))
    np.testing.assert_allclose(np.bincount(s[:, 1], minlength=5) / 4000, second, atol=0.03)


def test_reproducible_with_seed_and_generator():
    w = flow.rand(3, 6)
    flow.manual_seed(5)
    a = flow.multinomial(w, 4).numpy()
    flow.manual_seed(5)
    b = w.multinomial(4).numpy()
    np.testing.assert_array_equal(a, b)
    g1, g2 = flow.Generator(), flow.Generator()
    g1.manual_seed(3)
    g2.manual_seed(3)
    np.testing.assert_array_equal(flow.multinomial(w, 8, True, generator=g1).numpy(),
                                  flow.multinomial(w, 8, True, generator=g2).numpy())


def test_multinomial_in_graph_matches_eager():
    w = flow.tensor(np.random.default_rng(0).random((2, 5)))

    class G(flow.nn.Graph):
        def build(self, x):
            return flow.multinomial(x, 3), flow.multinomial(x, 6, replacement=True)

    flow.manual_seed(7)
    eager = [flow.multinomial(w, 3), flow.multinomial(w, 6, replacement=True)]
    flow.manual_seed(7)
    for ours, ref in zip(G()(w), eager):
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_tensor_bernoulli():
    flow.manual_seed(0)
    p = flow.tensor(np.array([0.0, 0.25, 1.0]).repeat(4000).reshape(3, 4000))
    draws = p.bernoulli()
    assert draws.dtype == p.dtype
    np.testing.assert_allclose(draws.numpy().mean(1), [0, 0.25, 1], atol=0.03)
    x = flow.zeros(4000)
    assert x.bernoulli_(0.7) is x
    assert abs(float(x.mean()) - 0.7) < 0.03
    assert flow.zeros(2).bernoulli(p=1.0).numpy().tolist() == [1.0, 1.0]


@pytest.mark.timeout(60)
def test_multinomial_errors():
    with pytest.raises(Exception, match="cannot draw 5 samples without replacement from 4"):
        flow.multinomial(flow.ones(4), 5)
    with pytest.raises(Exception, match="1-d or 2-d"):
        flow.multinomial(flow.ones(2, 2, 2), 1)
    with pytest.raises(Exception, match="floating-point weights"):
        flow.multinomial(flow.ones(3, dtype=flow.int64), 1)
    with pytest.raises(Exception, match="finite and non-negative"):
        flow.multinomial(flow.tensor([0.5, -0.1]), 1, True).numpy()
    with pytest.raises(Exception, match="positive sum"):
        flow.multinomial(flow.zeros(2, 3), 1, True).numpy()
    with pytest.raises(Exception, match="only 1 non-zero weights"):
        flow.multinomial(flow.tensor([0.0, 1.0, 0.0]), 2).numpy()
