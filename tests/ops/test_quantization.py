"""Quantization ops (min_max_observer, moving_average_min_max_observer, quantization,
fake_quantization) against NumPy formulas written out here."""
import numpy as np
import pytest

import actorflow as flow
from actorflow import functional as F


def _np_scale(x, bit, scheme, per_layer):
    rows = x.reshape(1 if per_layer else x.shape[0], -1)
    if scheme == "symmetric":
        return np.abs(rows).max(1) / (2.0 ** (bit - 1) - 1), np.zeros(len(rows))
    lo, hi = rows.min(1), rows.max(1)
    scale = (hi - lo) / (2.0 ** bit - 1)
    return scale, -np.rint(lo / scale)


def _np_levels(x, scale, zp, bit, scheme):
    rows = x.reshape(len(scale), -1)
    if scheme == "symmetric":
        q = np.clip(np.rint(rows / scale[:, None]), -(2 ** (bit - 1)), 2 ** (bit - 1) - 1)
    else:
        q = np.clip(np.rint(rows / scale[:, None] + zp[:, None]), 0, 2 ** bit - 1)
    return q


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bit", [8, 3])
@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
@pytest.mark.parametrize("per_layer", [True, False])
def test_observer_quantize_fake_quantize(dtype, bit, scheme, per_layer):
    x = (np.random.default_rng(0).random((4, 3, 5)) - 0.3).astype(dtype)
    t = flow.tensor(x, requires_grad=True)
    scale, zp = F.min_max_observer(t, "google", bit, scheme, per_layer)
    want_scale, want_zp = _np_scale(x, bit, scheme, per_layer)
    np.testing.assert_allclose(scale.numpy(), want_scale, rtol=1e-6)
    np.testing.assert_array_equal(zp.numpy(), want_zp)
    q = flow.nn.Quantization("google", bit, scheme)(t, scale, zp)
    levels = _np_levels(x, scale.numpy(), zp.numpy(), bit, scheme)
    np.testing.assert_array_equal(q.numpy().reshape(levels.shape), levels)
    assert q.dtype == t.dtype
    fq = flow.nn.FakeQuantization("google", bit, scheme)(t, scale, zp)
    deq = (levels - zp.numpy()[:, None]) * scale.numpy()[:, None]
    np.testing.assert_allclose(fq.numpy().reshape(deq.shape), deq, rtol=1e-6, atol=1e-7)
    g = np.random.default_rng(1).standard_normal(x.shape)
    fq.backward(flow.tensor(g.astype(dtype)))
    np.testing.assert_array_equal(t.grad.numpy(), g.astype(dtype))  # straight through


def test_rounding_is_half_to_even_and_cambricon_is_a_power_of_two():
    x = flow.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 100.0])
    one = flow.tensor([1.0])
    q = F.quantization(x, one, flow.tensor([0.0]), "google", 8, "symmetric")
    np.testing.assert_array_equal(q.numpy(), [0, 2, 2, -0, -2, 100])
    x = flow.tensor([0.3, -5.0, 1.0])
    shift, zp = F.min_max_observer(x, "cambricon", 8)
    assert float(shift) == np.floor(np.log2(5.0)) - 6 and float(zp) == 0
    fq = F.fake_quantization(x, shift, zp, "cambricon", 8)
    s = 2.0 ** float(shift)
    np.testing.assert_allclose(fq.numpy(), np.clip(np.rint(x.numpy() / s), -128, 127) * s)


@pytest.mark.parametrize("scheme", ["symmetric", "affine"])
def test_moving_average_observer_updates_its_buffers(scheme):
    rng = np.random.default_rng(2)
    obs = flow.nn.MovingAverageMinMaxObserver(stop_update_after_iters=2,
                                              quantization_scheme=scheme, momentum=0.9)
    mmax = mmin = 0.0
    for step in range(4):
        x = (rng.random((3, 7)) - 0.4).astype(np.float32)
        scale, zp = obs(flow.tensor(x), flow.tensor([step], dtype=flow.int64))
        if step <= 2:
            hi = np.abs(x).max() if scheme == "symmetric" else x.max()
            lo = hi if scheme == "symmetric" else x.min()
            mmax = hi if mmax == 0 else mmax * 0.9 + hi * 0.1
            mmin = lo if mmin == 0 else mmin * 0.9 + lo * 0.1
        np.testing.assert_allclose(obs.moving_max.numpy(), [mmax], rtol=1e-6)
        np.testing.assert_allclose(obs.moving_min.numpy(), [mmin], rtol=1e-6)
        if scheme == "symmetric":
            np.testing.assert_allclose(scale.numpy(), [mmax / 127], rtol=1e-6)
        else:
            want = (mmax - mmin) / 255
            np.testing.assert_allclose(scale.numpy(), [want], rtol=1e-5)
            np.testing.assert_allclose(zp.numpy(), [-np.round(mmin / want)], atol=0)
    obs.eval()
    before = obs.moving_max.numpy().copy()
    obs(flow.tensor(np.full((2, 2), 9.0, np.float32)), flow.tensor([0], dtype=flow.int64))
    np.testing.assert_array_equal(obs.moving_max.numpy(), before)


def test_errors_name_the_op():
    x = flow.randn(4, 3)
    with pytest.raises(Exception, match="min_max_observer.*quantization_scheme"):
        F.min_max_observer(x, "google", 8, "asymmetric")
    with pytest.raises(Exception, match="quantization_bit"):
        F.min_max_observer(x, "google", 9)
    with pytest.raises(Exception, match="fake_quantization.*per-channel"):
        F.fake_quantization(x, flow.ones(3), flow.zeros(3))
    with pytest.raises(Exception, match="cambricon"):
        F.min_max_observer(x, "cambricon", 8, "symmetric", False)


@pytest.mark.timeout(60)
def test_quantization_aware_step_in_a_graph_matches_eager():
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)

    def make():
        flow.manual_seed(0)
        lin = flow.nn.Linear(4, 3)
        obs = flow.nn.MovingAverageMinMaxObserver(stop_update_after_iters=5)
        fq = flow.nn.FakeQuantization()
        return lin, obs, fq

    def step(lin, obs, fq, t, i):
        h = lin(t)
        scale, zp = obs(h, flow.tensor([i], dtype=flow.int64))
        return fq(h, scale, zp)

    eager = make()
    graph_mods = make()

    class G(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin, self.obs, self.fq = graph_mods

        def build(self, t, i):
            h = self.lin(t)
            scale, zp = self.obs(h, i)
            return self.fq(h, scale, zp)

    g = G()
    for i in range(3):
        want = step(*eager, flow.tensor(x * (i + 1)), i)
        got = g(flow.tensor(x * (i + 1)), flow.tensor([i], dtype=flow.int64))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(graph_mods[1].moving_max.numpy(), eager[1].moving_max.numpy())
