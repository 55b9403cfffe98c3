"""nn.utils.clip_grad_norm_ / clip_grad_value_ vs PyTorch and NumPy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as flow
from actorflow.optim.clip_grad import clip_grad_norm_, clip_grad_value_
from tests import helpers

SHAPES = [(2, 3), (4,), (1, 2, 2)]


def _params(grads, dtype=np.float32):
    params = []
    for g in grads:
        p = flow.tensor(np.zeros(g.shape, dtype), requires_grad=True)
        p.grad = flow.tensor(g.astype(dtype))
        params.append(p)
    return params


def _grads(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, 0.0, math.inf, -math.inf])
@pytest.mark.parametrize("max_norm", [0.0, 0.5, 100.0])
def test_clip_grad_norm_vs_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    grads = _grads()
    params = _params(grads)
    total = clip_grad_norm_(params, max_norm, norm_type)
    tparams = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(tparams, grads):
        p.grad = helpers.to_torch(g)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type)
    np.testing.assert_allclose(total.numpy(), ttotal.numpy(), rtol=1e-5)
    assert total.dtype == flow.float32 and total.shape == ()
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_numpy_and_string_norm_type():
    grads = _grads(1)
    flat = np.concatenate([g.ravel() for g in grads]).astype(np.float64)
    params = _params(grads, np.float64)
    total = clip_grad_norm_(params, 1.0, "inf")
    assert total.dtype == flow.float64
    assert total.item() == pytest.approx(np.abs(flat).max())
    coef = 1.0 / (np.abs(flat).max() + 1e-6)
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)


@pytest.mark.parametrize("clip_value", [0.0, 0.3, 5.0])
def test_clip_grad_value_vs_torch(clip_value):
    torch = pytest.importorskip("torch")
    grads = _grads(2)
    params = _params(grads)
    assert clip_grad_value_(params, clip_value) is None
    tparams = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(tparams, grads):
        p.grad = helpers.to_torch(g)
    torch.nn.utils.clip_grad_value_(tparams, clip_value)
    for p, t in zip(params, tparams):
        np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())


def test_single_tensor_missing_grads_and_empty():
    x = flow.tensor(np.zeros(3, np.float32), requires_grad=True)
    y = flow.tensor(np.zeros(2, np.float32), requires_grad=True)
    x.grad = flow.tensor(np.array([3.0, 0.0, 4.0], np.float32))
    total = clip_grad_norm_([x, y], 1.0)
    assert y.grad is None
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(x.grad.numpy(), [0.6, 0.0, 0.8], rtol=1e-5)
    clip_grad_value_(x, 0.7)
    np.testing.assert_allclose(x.grad.numpy(), [0.6, 0.0, 0.7], rtol=1e-5)
    assert clip_grad_norm_([y], 1.0).item() == 0.0


def test_gradient_of_broadcast_is_clipped_in_place():
    x = flow.tensor(np.arange(4, dtype=np.float32), requires_grad=True)
    x.sum().backward()  # sum()'s gradient is a broadcast; the engine gives .grad its own memory
    assert x.grad.numpy().flags.writeable
    total = clip_grad_norm_(x, 1.0)
    assert total.item() == pytest.approx(2.0)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 0.5), rtol=1e-5)
    clip_grad_value_(x, 0.1)
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 0.1), rtol=1e-6)


def test_nonfinite_norm():
    x = flow.tensor(np.zeros(2, np.float32), requires_grad=True)
    x.grad = flow.tensor(np.array([np.nan, 1.0], np.float32))
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(x, 1.0, error_if_nonfinite=True)
    total = clip_grad_norm_(x, 1.0)
    assert math.isnan(total.item())
    assert np.isnan(x.grad.numpy()).all()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=1, max_size=8),
       st.floats(0.01, 10.0), st.sampled_from([1.0, 2.0, 3.0, math.inf]))
def test_clipped_norm_is_at_most_max_norm(values, max_norm, norm_type):
    g = np.array(values, np.float64)
    (p,) = _params([g], np.float64)
    total = clip_grad_norm_(p, max_norm, norm_type).item()
    after = np.linalg.norm(p.grad.numpy(), norm_type)
    assert after <= max_norm * (1 + 1e-9)
    if total + 1e-6 <= max_norm:  # the scale min(max_norm / (total + 1e-6), 1) is 1
        np.testing.assert_array_equal(p.grad.numpy(), g)
    else:
        np.testing.assert_allclose(p.grad.numpy(), g * max_norm / (total + 1e-6), rtol=1e-12)


@pytest.mark.parametrize("norm_type", [math.inf, -math.inf, 2.0, 1.0])
@pytest.mark.parametrize("where", [0, 1])
def test_nan_in_any_gradient_gives_a_nan_norm(norm_type, where):
    # a NaN in the first or a later gradient: the norm is NaN either way (as PyTorch's)
    grads = [np.array([1.0, -2.0], np.float32), np.array([0.5], np.float32)]
    grads[where] = np.array([np.nan, 3.0], np.float32)
    total = clip_grad_norm_(_params(grads), 1.0, norm_type)
    assert math.isnan(total.item())
