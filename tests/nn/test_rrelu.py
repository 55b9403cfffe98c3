"""rrelu / nn.RReLU: eval mode vs PyTorch, training-mode slopes and gradients, finite
differences (float64) with the noise fixed by a seeded generator."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.helpers import gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")

X = np.random.default_rng(0).standard_normal((4, 5))


@needs_torch
@pytest.mark.parametrize("lower,upper", [(0.125, 1 / 3), (0.3, 0.3), (-0.5, 0.1)])
def test_eval_mode_and_equal_bounds_match_pytorch(lower, upper):
    for training in (False, True) if lower == upper else (False,):
        fx = flow.tensor(X, requires_grad=True)
        tx = torch.tensor(X, requires_grad=True)
        fy = flow.nn.functional.rrelu(fx, lower, upper, training)
        ty = torch.nn.functional.rrelu(tx, lower, upper, training)
        np.testing.assert_allclose(fy.numpy(), ty.detach().numpy(), rtol=1e-12)
        fy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    m, tm = nn.RReLU(lower, upper).eval(), torch.nn.RReLU(lower, upper).eval()
    np.testing.assert_allclose(m(flow.tensor(X)).numpy(), tm(torch.tensor(X)).numpy(),
                               rtol=1e-12)


def test_training_slopes_are_per_element_in_bounds_and_are_the_gradient():
    x = flow.tensor(X, requires_grad=True)
    y = nn.RReLU(0.1, 0.6)(x)  # a module starts in training mode
    y.sum().backward()
    slope = y.detach().numpy() / X
    neg = X < 0
    np.testing.assert_allclose(slope[~neg], 1.0)
    assert np.all((slope[neg] >= 0.1) & (slope[neg] <= 0.6))
    assert len(np.unique(np.round(slope[neg], 12))) == neg.sum()  # one draw per element
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-6)


def test_seeded_and_generator_draws_repeat():
    flow.manual_seed(3)
    a = flow.nn.functional.rrelu(flow.tensor(X), training=True).numpy()
    flow.manual_seed(3)
    b = flow.nn.functional.rrelu(flow.tensor(X), training=True).numpy()
    np.testing.assert_array_equal(a, b)
    g1, g2 = flow.Generator(), flow.Generator()
    g1.manual_seed(7)
    g2.manual_seed(7)
    c = flow.nn.functional.rrelu(flow.tensor(X), training=True, generator=g1).numpy()
    d = flow.nn.functional.rrelu(flow.tensor(X), training=True, generator=g2).numpy()
    np.testing.assert_array_equal(c, d)


def test_gradient_matches_finite_differences():
    def fn(x):
        g = flow.Generator()
        g.manual_seed(11)  # the same slopes at every evaluation
        return flow.nn.functional.rrelu(x, 0.2, 0.7, training=True, generator=g)

    gradcheck(fn, X + np.sign(X) * 0.05)  # away from the kink at 0


def test_inplace_writes_into_the_input():
    x = flow.tensor(X, requires_grad=True)
    h = x * 1.0
    out = nn.RReLU(0.2, 0.2, inplace=True)(h)
    assert out is h
    np.testing.assert_allclose(h.detach().numpy(), np.where(X >= 0, X, 0.2 * X))
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(X >= 0, 1.0, 0.2))
    y = flow.tensor(X)
    flow.nn.functional.rrelu_(y, 0.1, 0.5, training=True)
    assert np.all((y.numpy() / X)[X < 0] <= 0.5)


def test_bounds_are_checked():
    with pytest.raises(ValueError, match=r"rrelu: lower \(0.5\) must not exceed upper"):
        flow.nn.functional.rrelu(flow.tensor(X), 0.5, 0.1, training=True)
