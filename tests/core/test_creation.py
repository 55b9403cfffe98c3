"""Creation ops: from data, from attrs, and random draws (shapes, dtypes, ranges, seeding)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow

FLOATS = [flow.float16, flow.bfloat16, flow.float32, flow.float64]


def test_tensor_copies_as_tensor_and_from_numpy_share():
    a = np.arange(4.0)
    t = flow.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    s = flow.as_tensor(a)
    f = flow.from_numpy(a)
    a[1] = 7.0
    assert s.tolist()[1] == 7.0 and f.tolist()[1] == 7.0
    f.numpy()[2] = -1.0
    assert a[2] == -1.0
    assert flow.as_tensor(a, dtype=flow.float32).dtype is flow.float32
    assert not np.shares_memory(flow.as_tensor(a, dtype=flow.float32).numpy(), a)
    assert flow.as_tensor(t) is t
    assert flow.as_tensor([1, 2]).dtype is flow.int64
    with pytest.raises(TypeError, match="from_numpy"):
        flow.from_numpy([1.0])
    r = flow.tensor([1.0, 2.0], requires_grad=True)
    assert r.requires_grad and r.is_leaf


@pytest.mark.parametrize("size", [(2, 3), ((2, 3),), ([2, 3],), (flow.Size([2, 3]),)])
def test_constant_fills_and_size_forms(size):
    z, o = flow.zeros(*size), flow.ones(*size)
    assert z.shape == (2, 3) and z.dtype is flow.float32 and not z.numpy().any()
    assert o.shape == (2, 3) and (o.numpy() == 1).all()
    assert flow.empty(*size).shape == (2, 3)
    assert flow.rand(*size).shape == (2, 3) and flow.randn(*size).shape == (2, 3)


def test_full_and_like():
    assert flow.full((2,), 3).dtype is flow.int64
    assert flow.full((2,), 3.5).tolist() == [3.5, 3.5] and flow.full((1,), 3.5).dtype is \
        flow.float32
    assert flow.full((2,), True).dtype is flow.bool
    assert flow.full((2,), 1, dtype=flow.float64).dtype is flow.float64
    x = flow.tensor([[1, 2]], dtype=flow.int32)
    for fn, value in [(flow.zeros_like, 0), (flow.ones_like, 1)]:
        y = fn(x)
        assert y.shape == (1, 2) and y.dtype is flow.int32 and (y.numpy() == value).all()
    assert flow.full_like(x, 7).tolist() == [[7, 7]]
    assert flow.empty_like(x).shape == (1, 2)
    assert flow.ones_like(x, dtype=flow.float16).dtype is flow.float16
    w = flow.zeros(3, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    with pytest.raises(RuntimeError, match="floating point"):
        flow.zeros(3, dtype=flow.int64, requires_grad=True)


def test_arange_linspace_eye_match_numpy():
    assert flow.arange(5).tolist() == list(range(5)) and flow.arange(5).dtype is flow.int64
    assert flow.arange(2, 9, 3).tolist() == [2, 5, 8]
    assert flow.arange(5, 0, -2).tolist() == [5, 3, 1]
    r = flow.arange(0, 1, 0.25)
    assert r.dtype is flow.float32 and r.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert flow.arange(0, 5.5).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert flow.arange(3, dtype=flow.float64).dtype is flow.float64
    assert flow.arange(0, 1, 0.1).shape == (10,)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        flow.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="arange"):
        flow.arange(0, 5, -1)
    np.testing.assert_allclose(flow.linspace(-1, 1, 5).numpy(), np.linspace(-1, 1, 5))
    assert flow.linspace(0, 1, 1).tolist() == [0.0]
    assert flow.linspace(0, 10, 5, dtype=flow.int64).tolist() == [0, 2, 5, 7, 10]
    np.testing.assert_array_equal(flow.eye(3).numpy(), np.eye(3))
    np.testing.assert_array_equal(flow.eye(2, 4).numpy(), np.eye(2, 4))


@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
def test_rand_randn_dtypes_and_ranges(d):
    flow.manual_seed(0)
    u = flow.rand(20000, dtype=d)
    assert u.dtype is d and u.shape == (20000,)
    v = u.double().numpy()
    assert v.min() >= 0.0 and v.max() < 1.0, "rand must stay in [0, 1) for every dtype"
    assert abs(v.mean() - 0.5) < 0.02
    n = flow.randn(20000, dtype=d).double().numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05
    with pytest.raises(TypeError, match="floating"):
        flow.rand(2, dtype=flow.int32)


def test_randint_randperm_normal_bernoulli():
    flow.manual_seed(1)
    r = flow.randint(3, 7, (1000,))
    assert r.dtype is flow.int64 and r.numpy().min() == 3 and r.numpy().max() == 6
    assert flow.randint(5, (2, 2)).shape == (2, 2)
    assert flow.randint(0, 2, (3,), dtype=flow.int32).dtype is flow.int32
    with pytest.raises(RuntimeError, match="randint"):
        flow.randint(5, 5, (2,))
    p = flow.randperm(50)
    assert p.dtype is flow.int64 and sorted(p.tolist()) == list(range(50))
    assert p.tolist() != list(range(50))
    g = flow.normal(2.0, 3.0, (20000,)).numpy()
    assert abs(g.mean() - 2.0) < 0.1 and abs(g.std() - 3.0) < 0.1
    m = flow.normal(flow.full((20000,), -1.0), 0.5).numpy()
    assert abs(m.mean() + 1.0) < 0.05 and abs(m.std() - 0.5) < 0.05
    b = flow.bernoulli(flow.full((20000,), 0.25))
    assert b.dtype is flow.float32 and set(np.unique(b.numpy())) <= {0.0, 1.0}
    assert abs(b.numpy().mean() - 0.25) < 0.02
    half = flow.bernoulli(flow.full((8,), 0.5, dtype=flow.float64))
    assert half.dtype is flow.float64
    assert flow.bernoulli(flow.zeros(6), p=1.0).tolist() == [1.0] * 6
    assert flow.bernoulli(flow.tensor([0.0, 1.0, 0.0, 1.0])).tolist() == [0.0, 1.0, 0.0, 1.0]


def _draw_all():
    return [flow.rand(4).numpy().copy(), flow.randn(4).numpy().copy(),
            flow.randint(0, 1000, (4,)).numpy().copy(), flow.randperm(8).numpy().copy(),
            flow.normal(0.0, 1.0, (4,)).numpy().copy(),
            flow.bernoulli(flow.full((16,), 0.5)).numpy().copy()]


def test_manual_seed_reproduces_every_random_op():
    flow.manual_seed(123)
    first = _draw_all()
    second = _draw_all()
    flow.manual_seed(123)
    again = _draw_all()
    for a, b, c in zip(first, second, again):
        np.testing.assert_array_equal(a, c)
        assert not np.array_equal(a, b), "draws without re-seeding must differ"
    assert flow.initial_seed() == 123


def test_generators_and_rng_state():
    g1, g2 = flow.Generator(5), flow.Generator(5)
    np.testing.assert_array_equal(flow.randn(6, generator=g1).numpy(),
                                  flow.randn(6, generator=g2).numpy())
    assert flow.randperm(10, generator=g1).tolist() == flow.randperm(10, generator=g2).tolist()
    flow.manual_seed(0)
    before = flow.rand(3).tolist()
    flow.manual_seed(0)
    flow.randn(3, generator=g1)  # a private generator leaves the global stream alone
    assert flow.rand(3).tolist() == before
    state = flow.get_rng_state()
    a = flow.rand(3).tolist()
    flow.set_rng_state(state)
    assert flow.rand(3).tolist() == a


def test_like_random():
    x = flow.zeros(2, 3, dtype=flow.float64)
    assert flow.rand_like(x).dtype is flow.float64 and flow.rand_like(x).shape == (2, 3)
    assert flow.randn_like(x).shape == (2, 3)
    r = flow.randint_like(x, 4)
    assert r.dtype is flow.float64 and r.numpy().max() < 4


def test_negative_seeds_count_modulo_2_64():
    import torch
    for s in (-1, -12345, -2**63):
        g = flow.Generator().manual_seed(s)
        assert g.initial_seed() == torch.Generator().manual_seed(s).initial_seed() == s % 2**64
        same = flow.Generator().manual_seed(s % 2**64)
        np.testing.assert_array_equal(flow.rand(5, generator=g).numpy(),
                                      flow.rand(5, generator=same).numpy())
        state = g.get_state()
        a = flow.rand(3, generator=g).tolist()
        g.set_state(state)
        assert g.initial_seed() == s % 2**64 and flow.rand(3, generator=g).tolist() == a
    for bad in (2**64, -2**63 - 1):
        with pytest.raises(ValueError, match="manual_seed"):
            flow.Generator().manual_seed(bad)
    flow.manual_seed(-2)
    assert flow.initial_seed() == 2**64 - 2
    flow.manual_seed(0)
    a = flow.nn.CoinFlip(batch_size=64, random_seed=-3)().numpy()
    b = flow.nn.CoinFlip(batch_size=64, random_seed=2**64 - 3)().numpy()
    np.testing.assert_array_equal(a, b)
