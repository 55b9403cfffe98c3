"""linalg.eigh / eigvalsh / svd / svdvals / pinv against PyTorch (values and gradients) and
finite differences in float64."""
import numpy as np
import pytest
import torch

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck

rng = np.random.default_rng(4)


def _sym(a):
    return a + np.swapaxes(a, -1, -2)


def _gauge_free(u, vh, w1, w2):
    """A loss of U and Vh (or V) unchanged by flipping the sign of a singular vector."""
    return (u * u * w1).sum() + (vh * vh * w2).sum()


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4), (1, 2, 6, 2)])
def test_svd_matches_torch_values_and_gradients(shape):
    a = rng.standard_normal(shape)
    x, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    u, s, vh = flow.linalg.svd(x, full_matrices=False)
    tu, ts, tvh = torch.linalg.svd(t, full_matrices=False)
    np.testing.assert_allclose(s.numpy(), ts.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((u * s.unsqueeze(-2)).matmul(vh).numpy(), a, atol=1e-12)
    w1, w2, ws = (rng.standard_normal(tuple(z.shape)) for z in (tu, tvh, ts))
    (_gauge_free(u, vh, flow.tensor(w1), flow.tensor(w2)) + (s * flow.tensor(ws)).sum()
     ).backward()
    (_gauge_free(tu, tvh, torch.tensor(w1), torch.tensor(w2)) + (ts * torch.tensor(ws)).sum()
     ).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)
    gradcheck(lambda z: _gauge_free(*flow.linalg.svd(z, full_matrices=False)[::2],
                                    flow.tensor(w1), flow.tensor(w2)), a)
    gradcheck(flow.linalg.svdvals, a)


def test_svd_full_matrices_shapes_and_errors():
    a = rng.standard_normal((5, 3))
    u, s, vh = flow.linalg.svd(flow.tensor(a))
    assert tuple(u.shape) == (5, 5) and tuple(s.shape) == (3,) and tuple(vh.shape) == (3, 3)
    np.testing.assert_allclose(u.matmul(u.T).numpy(), np.eye(5), atol=1e-12)
    x = flow.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError, match="full_matrices"):
        flow.linalg.svd(x)[0].sum().backward()
    with pytest.raises(OpError, match="linalg.svd.*floating"):
        flow.linalg.svd(flow.ones(2, 2, dtype=flow.int64))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_matches_torch_values_and_gradients(uplo):
    a = _sym(rng.standard_normal((2, 4, 4)))
    x, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    lam, v = flow.linalg.eigh(x, UPLO=uplo)
    tl, tv = torch.linalg.eigh(t, UPLO=uplo)
    np.testing.assert_allclose(lam.numpy(), tl.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(flow.linalg.eigvalsh(x, uplo).numpy(), lam.numpy())
    w, wl = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4))
    ((v * v * flow.tensor(w)).sum() + (lam * flow.tensor(wl)).sum()).backward()
    ((tv * tv * torch.tensor(w)).sum() + (tl * torch.tensor(wl)).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)
    gradcheck(lambda z: (flow.linalg.eigh(z + z.transpose(-2, -1))[1] ** 2
                         * flow.tensor(w[0])).sum(), a[0])
    gradcheck(lambda z: flow.linalg.eigvalsh(z + z.transpose(-2, -1)), a[0])
    with pytest.raises(OpError, match=r"linalg.eigh.*square.*\(2, 3\)"):
        flow.linalg.eigh(flow.ones(2, 3, dtype=flow.float64))


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
def test_pinv_matches_torch_and_finite_differences(shape):
    a = rng.standard_normal(shape)
    np.testing.assert_allclose(flow.linalg.pinv(flow.tensor(a)).numpy(),
                               torch.linalg.pinv(torch.tensor(a)).numpy(), atol=1e-12)
    gradcheck(flow.linalg.pinv, a)


def test_pinv_of_a_rank_deficient_matrix_tolerances_and_hermitian():
    b = rng.standard_normal((4, 2))
    a = b @ b.T  # rank 2, symmetric
    for kw in ({}, {"hermitian": True}, {"atol": 1e-3}, {"rtol": 1e-2}):
        np.testing.assert_allclose(flow.linalg.pinv(flow.tensor(a), **kw).numpy(),
                                   torch.linalg.pinv(torch.tensor(a), **kw).numpy(),
                                   atol=1e-10)
