"""Complex tensors through abs, angle, square, log, isnan/isinf/isfinite, flow.complex /
polar, printing, flow.save / flow.load and nn.Graph: values and gradients (PyTorch's conjugate
Wirtinger convention) against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import FnGraph, torch

RNG = np.random.default_rng(13)
Z = np.array([1 + 2j, 3 - 4j, 0j, -2 + 0.5j, -1.5 - 0.25j])


@pytest.mark.parametrize("name", ["abs", "angle"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_abs_and_angle_match_torch(name, dtype):
    z, tz = flow.tensor(Z.astype(dtype), requires_grad=True), \
        torch.tensor(Z.astype(dtype), requires_grad=True)
    y, ty = getattr(flow, name)(z), getattr(torch, name)(tz)
    assert y.dtype.name == str(ty.dtype).split(".")[1]
    tol = 1e-12 if dtype == np.complex128 else 1e-6
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    w = RNG.standard_normal(Z.shape)
    (y * flow.tensor(w.astype(y.numpy().dtype))).sum().backward()
    (ty * torch.tensor(w, dtype=ty.dtype)).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=tol, atol=tol)
    assert getattr(flow.tensor(Z), name)().dtype is flow.float64  # Tensor methods


def test_angle_of_real_tensors_matches_torch():
    a = np.array([-1.5, 0.0, 2.0, np.nan, -0.0])
    x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(flow.angle(x).numpy(), torch.angle(tx).detach().numpy())
    flow.angle(x).sum().backward()
    torch.angle(tx).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    assert flow.angle(flow.tensor([1, -2])).dtype is flow.float32


@pytest.mark.parametrize("name", ["square", "log"])
def test_square_and_log_match_torch(name):
    a = Z[[0, 1, 3, 4]]
    z, tz = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = getattr(flow, name)(z), getattr(torch, name)(tz)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    w = RNG.standard_normal(a.shape) + 1j * RNG.standard_normal(a.shape)
    (y * flow.tensor(w)).sum().real.backward()
    (ty * torch.tensor(w)).sum().real.backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("exponent", [2, 0.5, -1, 1.5 + 0.5j, 0])
def test_complex_tensor_to_a_number_matches_torch(exponent):
    a = Z[[0, 1, 3, 4]]
    z, tz = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = z ** exponent, tz ** exponent
    assert y.dtype is flow.complex128
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    w = RNG.standard_normal(a.shape) + 1j * RNG.standard_normal(a.shape)
    (y * flow.tensor(w)).sum().real.backward()
    (ty * torch.tensor(w)).sum().real.backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-12, atol=1e-14)
    x = flow.tensor([1.0, 2.0], requires_grad=True)  # a real tensor to a complex power
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    (x ** 1j).real.sum().backward()
    (tx ** 1j).real.sum().backward()
    assert (x ** 1j).dtype is flow.complex64
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_nan_and_inf_tests_of_complex_tensors():
    a = np.array([1 + 1j, complex(np.nan, 0), complex(0, np.inf), complex(np.inf, np.nan)])
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(flow, name)(flow.tensor(a)).numpy(),
                                      getattr(torch, name)(torch.tensor(a)).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_complex_and_polar_match_torch(dtype):
    a, b = RNG.standard_normal((2, 3)).astype(dtype), RNG.standard_normal(3).astype(dtype)
    for name in ("complex", "polar"):
        if name == "polar":  # abs >= 0 (PyTorch's gradient assumes it)
            a = np.abs(a)
        x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
        tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        if name == "polar":  # torch.polar does not broadcast
            ty = torch.tensor(np.broadcast_to(b, a.shape).copy(), requires_grad=True)
        c, tc = getattr(flow, name)(x, y), getattr(torch, name)(tx, ty)
        assert c.dtype.name == str(tc.dtype).split(".")[1]
        np.testing.assert_allclose(c.numpy(), tc.detach().numpy(), rtol=1e-6)
        w = RNG.standard_normal(a.shape) + 1j * RNG.standard_normal(a.shape)
        (c * flow.tensor(w.astype(c.numpy().dtype))).sum().real.backward()
        (tc * torch.tensor(w, dtype=tc.dtype)).sum().real.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        want_y = ty.grad.numpy() if name == "complex" else ty.grad.numpy().sum(0)
        np.testing.assert_allclose(y.grad.numpy(), want_y, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="complex: real and imag must have the same dtype"):
        flow.complex(flow.ones(2), flow.ones(2, dtype=flow.float64))
    with pytest.raises(TypeError, match="complex: expected real to be a float32 or float64"):
        flow.complex(flow.tensor([1, 2]), flow.ones(2))


def test_printing_and_save_load_round_trip(tmp_path):
    z64 = flow.tensor(Z.astype(np.complex64))
    assert "dtype=actorflow.complex64" in repr(z64) and "-1.5-0.25j" in repr(z64)
    assert "3. -4.j" in str(flow.tensor(Z))
    state = {"z": flow.tensor(Z.reshape(5, 1)), "w": z64, "nested": [z64, 2]}
    path = tmp_path / "c.safetensors"
    flow.save(state, path)
    back = flow.load(path)
    assert back["z"].dtype is flow.complex128 and back["w"].dtype is flow.complex64
    np.testing.assert_array_equal(back["z"].numpy(), Z.reshape(5, 1))
    np.testing.assert_array_equal(back["w"].numpy(), Z.astype(np.complex64))
    assert back["nested"][0] is back["w"]


def test_complex_ops_in_graph_match_eager():
    z, w = flow.tensor(Z), flow.tensor(RNG.standard_normal(5))

    def fn(a, b):
        c = flow.complex(b, b * 2) * a
        return flow.abs(c) + flow.angle(c) + flow.real(flow.log(c + 5)) + flow.abs(c.square())

    np.testing.assert_allclose(FnGraph(fn)(z, w).numpy(), fn(z, w).numpy(), rtol=1e-12)
