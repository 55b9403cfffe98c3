"""ctc_loss / nn.CTCLoss against PyTorch (values and gradients, padded and concatenated
targets, impossible alignments, zero_infinity); gradients by finite differences through
log_softmax (float64)."""
import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
rng = np.random.default_rng(0)
T, N, C = 10, 4, 5
LOGITS = rng.standard_normal((T, N, C))
TARGETS = rng.integers(1, C, (N, 4))
IN_LEN = np.array([10, 8, 10, 2])     # the last cannot emit 3 labels in 2 steps
TGT_LEN = np.array([4, 3, 0, 3])


def _both(lib, logits, targets, zero_infinity, reduction, dtype):
    x = lib.tensor(logits, dtype=dtype, requires_grad=True)
    lp = x.log_softmax(2)
    loss = lib.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_infinity)(
        lp, lib.tensor(targets), lib.tensor(IN_LEN), lib.tensor(TGT_LEN))
    return x, loss


@needs_torch
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [True, False])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_like_torch(reduction, zero_infinity, concatenated):
    targets = TARGETS
    if concatenated:
        targets = np.concatenate([TARGETS[b, :TGT_LEN[b]] for b in range(N)])
    fx, fl = _both(flow, LOGITS, targets, zero_infinity, reduction, flow.float64)
    tx, tl = _both(torch, LOGITS, targets, zero_infinity, reduction, torch.float64)
    np.testing.assert_allclose(fl.numpy(), tl.detach().numpy(), rtol=1e-12)
    if not zero_infinity:
        assert np.isinf(fl.numpy()).any()
        return
    g = rng.standard_normal(tuple(tl.shape))
    fl.backward(flow.tensor(g))
    tl.backward(torch.tensor(g))
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


@needs_torch
def test_ctc_loss_unbatched_float32_and_blank():
    lp32 = np.log(rng.dirichlet(np.ones(C), size=T)).astype(np.float32)
    tgt = np.array([0, 2, 2, 1])
    got = flow.nn.functional.ctc_loss(flow.tensor(lp32), flow.tensor(tgt), [T], [4], blank=3)
    want = torch.nn.functional.ctc_loss(torch.tensor(lp32), torch.tensor(tgt), [T], [4],
                                        blank=3)
    assert got.dtype == flow.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_ctc_loss_gradient_by_finite_differences():
    def fn(x):
        return flow.nn.functional.ctc_loss(x.log_softmax(2), flow.tensor(TARGETS[:3]),
                                           flow.tensor(IN_LEN[:3]), flow.tensor(TGT_LEN[:3]),
                                           reduction="none")
    gradcheck(fn, LOGITS[:, :3])


def test_ctc_loss_errors():
    lp = flow.tensor(LOGITS).log_softmax(2)
    with pytest.raises(Exception, match="ctc_loss: input_lengths must be in"):
        flow.nn.functional.ctc_loss(lp, flow.tensor(TARGETS), flow.tensor([11, 1, 1, 1]),
                                    flow.tensor(TGT_LEN))
        flow.synchronize()
    with pytest.raises(Exception, match="reduction must be"):
        flow.nn.functional.ctc_loss(lp, flow.tensor(TARGETS), flow.tensor(IN_LEN),
                                    flow.tensor(TGT_LEN), reduction="avg")
