"""sin, cos, tan, sinh, cosh, tanh and sigmoid of complex tensors against PyTorch (values and
the conjugate-convention gradients of a real loss)."""
import numpy as np
import pytest
import torch

import actorflow as flow

rng = np.random.default_rng(7)


@pytest.mark.parametrize("name", ["sin", "cos", "tan", "sinh", "cosh", "tanh", "sigmoid"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_function_and_gradient_match_torch(name, dtype):
    z = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(dtype)
    w = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(dtype)
    x, t = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    y, ty = getattr(flow, name)(x), getattr(torch, name)(t)
    assert y.dtype == (flow.complex128 if dtype == np.complex128 else flow.complex64)
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    (y * flow.tensor(w)).abs().sum().backward()
    (ty * torch.tensor(w)).abs().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("kinds", [("c", "c"), ("c", "r"), ("r", "c")])
def test_complex_pow_of_tensors_matches_torch(kinds):
    def make(kind):
        if kind == "r":
            return np.abs(rng.standard_normal(5)) + 0.1
        return rng.standard_normal(5) + 1j * rng.standard_normal(5)

    a, b, w = make(kinds[0]), make(kinds[1]), make("c")
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, tout = flow.pow(x, y), torch.pow(tx, ty)
    assert out.dtype == flow.complex128
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12)
    (out * flow.tensor(w)).abs().sum().backward()
    (tout * torch.tensor(w)).abs().sum().backward()
    for g, tg in ((x.grad, tx.grad), (y.grad, ty.grad)):
        assert g.dtype.is_complex == tg.is_complex()
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10, atol=1e-12)
