"""Edge values where actorflow must give PyTorch's answer: losses whose every target is
ignored, sign of NaN, lgamma at -inf, ctc_loss target lengths that do not fit the targets."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn.functional as F
from tests.helpers import torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the reference")


def _grads(fn_flow, fn_torch, x, t, **kw):
    xf = flow.tensor(x, requires_grad=True)
    lf = fn_flow(xf, flow.tensor(t), **kw)
    lf.sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    lt = fn_torch(xt, torch.tensor(t), **kw)
    lt.sum().backward()
    return lf.numpy(), xf.grad.numpy(), lt.detach().numpy(), xt.grad.numpy()


@needs_torch
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["all_ignored", "all_ignored_custom", "some_ignored",
                                  "zero_weight", "spatial_all_ignored", "smoothing"])
def test_ignored_targets_match_torch(loss, reduction, case):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5))
    t = np.array([-100, -100, -100, -100])
    kw = {"reduction": reduction}
    if case == "all_ignored_custom":
        t, kw["ignore_index"] = np.array([2, 2, 2, 2]), 2
    elif case == "some_ignored":
        t = np.array([1, -100, 3, -100])
    elif case == "zero_weight":  # nothing ignored but every counted weight is 0
        t, kw["weight"] = np.array([1, 1, 2, 2]), np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    elif case == "spatial_all_ignored":
        x, t = rng.standard_normal((2, 5, 3)), np.full((2, 3), -100)
    elif case == "smoothing":
        if loss == "nll_loss":
            pytest.skip("nll_loss has no label smoothing")
        kw["label_smoothing"] = 0.2
        t = np.array([-100, -100, 0, -100]) if reduction != "mean" else t
    ff, ft = getattr(F, loss), getattr(torch.nn.functional, loss)
    if "weight" in kw:
        w = kw.pop("weight")
        lf, gf, lt, gt = _grads(lambda a, b, **k: ff(a, b, weight=flow.tensor(w), **k),
                                lambda a, b, **k: ft(a, b, weight=torch.tensor(w), **k),
                                x, t, **kw)
    else:
        lf, gf, lt, gt = _grads(ff, ft, x, t, **kw)
    np.testing.assert_allclose(lf, lt, rtol=1e-6, atol=1e-9, equal_nan=True)
    np.testing.assert_allclose(gf, gt, rtol=1e-6, atol=1e-9, equal_nan=True)
    if case.endswith("ignored") or case == "all_ignored_custom":
        assert not np.isnan(gf).any()


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_sign_of_nan_and_signed_zero(dtype):
    vals = [float("nan"), -float("nan"), -0.0, 0.0, -2.5, 3.0, -float("inf"), float("inf")]
    got = flow.sign(flow.tensor(vals, dtype=getattr(flow, dtype))).to(flow.float64).numpy()
    want = torch.sign(torch.tensor(vals, dtype=getattr(torch, dtype))).double().numpy()
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[2])  # sign(-0.0) is +0 in PyTorch
    x = flow.tensor(vals, dtype=flow.float64, requires_grad=True)
    flow.sign(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(len(vals)))


def test_sign_of_integers_and_bools_unchanged():
    np.testing.assert_array_equal(flow.sign(flow.tensor([-3, 0, 7])).numpy(), [-1, 0, 1])
    np.testing.assert_array_equal(flow.sign(flow.tensor([True, False])).numpy(), [True, False])


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lgamma_at_infinities_and_poles(dtype):
    vals = [-float("inf"), float("inf"), float("nan"), 0.0, -1.0, -2.0, -2.5, 0.5, 10.0]
    got = flow.lgamma(flow.tensor(vals, dtype=getattr(flow, dtype))).numpy()
    want = torch.lgamma(torch.tensor(vals, dtype=getattr(torch, dtype))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


def _ctc(targets, target_lengths, input_lengths=(6, 6)):
    lp = flow.tensor(np.random.default_rng(1).standard_normal((6, 2, 5))).log_softmax(2)
    return F.ctc_loss(lp, flow.tensor(targets), flow.tensor(list(input_lengths)),
                      flow.tensor(target_lengths), reduction="none").numpy()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("targets, lengths, words", [
    ([[1, 2, 3], [2, 3, 4]], [3, 4], "exceed the padded targets' length 3"),
    ([[1, 2, 3], [2, 3, 4]], [-1, 2], "must be >= 0"),
    ([1, 2, 3, 4, 1, 2, 3], [3, 5], "hold 7 labels but target_lengths [3, 5] sum to 8"),
    ([1, 2, 3, 4, 1, 2, 3], [3, 3], "sum to 6"),
])
def test_ctc_refuses_lengths_that_do_not_fit(targets, lengths, words):
    with pytest.raises(Exception, match="ctc_loss") as e:
        _ctc(targets, lengths)
    assert words in str(e.value)
    if torch is not None:  # PyTorch refuses each of them too
        lp = torch.randn(6, 2, 5).log_softmax(2)
        with pytest.raises(RuntimeError):
            torch.nn.functional.ctc_loss(lp, torch.tensor(targets), [6, 6], lengths)


@needs_torch
def test_ctc_lengths_that_fit_still_match_torch():
    rng = np.random.default_rng(1)
    lp = rng.standard_normal((6, 2, 5))
    for targets, lengths in (([[1, 2, 3], [2, 3, 4]], [3, 2]), ([1, 2, 3, 4, 1], [3, 2])):
        got = F.ctc_loss(flow.tensor(lp).log_softmax(2), flow.tensor(targets),
                         flow.tensor([6, 5]), flow.tensor(lengths), reduction="none").numpy()
        want = torch.nn.functional.ctc_loss(torch.tensor(lp).log_softmax(2),
                                            torch.tensor(targets), [6, 5], lengths,
                                            reduction="none").numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
