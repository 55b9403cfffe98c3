"""flow.fft (ops fft_c2c, fft_r2c, fft_c2r and the torch.fft functions over them): values
against NumPy and PyTorch for every norm, n/s cropping and padding and dim choice; gradients
against finite differences in float64 (complex inputs through their real and imaginary parts)
and against PyTorch's."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, torch

RNG = np.random.default_rng(11)
R = RNG.standard_normal((4, 6, 5))
C = R + 1j * RNG.standard_normal((4, 6, 5))

C2C = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn"]  # real or complex in, complex out
R2C = ["rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn"]  # real in, complex out
C2R = ["irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn"]  # complex in, real out
KWARGS_1D = [{}, {"n": 3, "dim": 1, "norm": "ortho"}, {"n": 9, "norm": "forward"},
             {"n": 7, "dim": 0, "norm": "backward"}]
KWARGS_ND = [{}, {"s": (3, 7), "dim": (0, 2), "norm": "ortho"}, {"s": (5, -1)},
             {"s": (3, 8), "dim": (2, 0), "norm": "forward"}]


def _kwargs(name):
    return KWARGS_1D if name[-1] not in "2n" else KWARGS_ND


def _check(name, x, kw, dtype=None):
    ref = getattr(torch.fft, name)(torch.tensor(x), **kw).resolve_conj().numpy()
    got = getattr(flow.fft, name)(flow.tensor(x, dtype=dtype), **kw)
    assert tuple(got.shape) == ref.shape
    tol = 1e-12 if dtype is None else 1e-4
    np.testing.assert_allclose(got.numpy(), ref, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_fft_values_match_torch(name):
    inputs = [R, C] if name in C2C else [R] if name in R2C else [C]
    for x in inputs:
        for kw in _kwargs(name):
            got = _check(name, x, kw)
            real_out = name in C2R
            assert got.dtype is (flow.float64 if real_out else flow.complex128)


def test_fft_matches_numpy_and_keeps_precision():
    np.testing.assert_allclose(flow.fft.fft(flow.tensor(C)).numpy(), np.fft.fft(C), atol=1e-12)
    np.testing.assert_allclose(flow.fft.irfftn(flow.tensor(C), s=(4, 6, 8)).numpy(),
                               np.fft.irfftn(C, s=(4, 6, 8), axes=(0, 1, 2)), atol=1e-12)
    x = R.astype(np.float32)
    assert flow.fft.rfft(flow.tensor(x)).dtype is flow.complex64
    assert flow.fft.hfft(flow.tensor(x)).dtype is flow.float32  # real input, promoted
    _check("fft2", R, {"norm": "ortho"}, dtype=flow.float32)
    # integers compute in the default float dtype
    assert flow.fft.fft(flow.tensor([1, 2, 3])).dtype is flow.complex64


def _complex_fn(name, kw):
    def fn(re, im):
        x = re.to(flow.complex128) + im.to(flow.complex128) * 1j
        y = getattr(flow.fft, name)(x, **kw)
        return (flow.real(y), flow.imag(y)) if y.dtype.is_complex else y
    return fn


def _real_fn(name, kw):
    def fn(x):
        y = getattr(flow.fft, name)(x, **kw)
        return (flow.real(y), flow.imag(y)) if y.dtype.is_complex else y
    return fn


@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_fft_gradients_finite_differences(name):
    small_r, small_c = R[:2, :3, :4], C[:2, :3, :4]
    for kw in _kwargs(name)[:2] + _kwargs(name)[3:]:
        kw = dict(kw)
        if "s" in kw:
            kw["s"] = tuple(max(-1, min(v, 5)) for v in kw["s"])
        if name not in R2C:
            gradcheck(_complex_fn(name, kw), small_c.real.copy(), small_c.imag.copy())
        if name not in C2R:
            gradcheck(_real_fn(name, kw), small_r.copy())


@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_fft_gradients_match_torch(name):
    x = R if name in R2C else C
    for kw in _kwargs(name):
        tx = torch.tensor(x, requires_grad=True)
        fx = flow.tensor(x, requires_grad=True)
        ty, fy = getattr(torch.fft, name)(tx, **kw), getattr(flow.fft, name)(fx, **kw)
        w = RNG.standard_normal(ty.shape) + (1j * RNG.standard_normal(ty.shape)
                                             if ty.is_complex() else 0)
        (ty * torch.tensor(w)).real.sum().backward()
        flow.real(fy * flow.tensor(w)).sum().backward()
        np.testing.assert_allclose(fx.grad.numpy(), tx.grad.resolve_conj().numpy(), atol=1e-10)


def test_fft_double_backward():
    x = flow.tensor(C, requires_grad=True)
    y = flow.fft.irfft(x, n=7)
    (g,) = flow.autograd.grad((y * y).sum(), [x], create_graph=True)
    (gg,) = flow.autograd.grad(flow.real(g).sum(), [x])
    tx = torch.tensor(C, requires_grad=True)
    ty = torch.fft.irfft(tx, n=7)
    (tg,) = torch.autograd.grad((ty * ty).sum(), [tx], create_graph=True)
    (tgg,) = torch.autograd.grad(tg.real.sum(), [tx])
    np.testing.assert_allclose(gg.numpy(), tgg.resolve_conj().numpy(), atol=1e-10)


def test_fft_in_graph_matches_eager():
    class G(flow.nn.Graph):
        def build(self, x):
            return flow.real(flow.fft.rfft2(x, norm="ortho")) + flow.fft.irfft(
                flow.fft.fft(x), n=8).sum()

    x = flow.tensor(R)
    eager = flow.real(flow.fft.rfft2(x, norm="ortho")) + flow.fft.irfft(flow.fft.fft(x), n=8).sum()
    np.testing.assert_allclose(G()(x).numpy(), eager.numpy(), atol=1e-12)


def test_fft_errors_name_the_function_and_shapes():
    with pytest.raises(TypeError, match="rfft expects a real input.*complex128"):
        flow.fft.rfft(flow.tensor(C))
    with pytest.raises(RuntimeError, match=r"fft.fft: invalid number of data points \(0\)"):
        flow.fft.fft(flow.tensor(R), n=0)
    with pytest.raises(ValueError, match="invalid normalization mode 'sideways'"):
        flow.fft.ifft(flow.tensor(C), norm="sideways")
    with pytest.raises(IndexError, match=r"dim 3 out of range.*\(4, 6, 5\)"):
        flow.fft.fft(flow.tensor(R), dim=3)
    with pytest.raises(RuntimeError, match="dims must be unique"):
        flow.fft.fft2(flow.tensor(R), dim=(1, 1))
    with pytest.raises(RuntimeError, match="invalid number of data points"):
        flow.fft.irfft(flow.tensor(C[:, :, :1]))
    with pytest.raises(TypeError, match="float16 is not supported"):
        flow.fft.fft(flow.tensor(R, dtype=flow.float16))


def test_fft_over_no_dims():
    x = flow.tensor(R)
    y = flow.fft.fftn(x, dim=[])
    assert y.dtype is flow.complex128
    np.testing.assert_array_equal(y.numpy(), R.astype(np.complex128))
    with pytest.raises(RuntimeError, match="rfftn must transform at least one axis"):
        flow.fft.rfftn(x, dim=[])
    with pytest.raises(RuntimeError, match="irfftn must transform at least one axis"):
        flow.fft.irfftn(flow.tensor(C), dim=[])


def test_fftfreq_rfftfreq_and_shifts_match_torch():
    for n in (1, 4, 5):
        for d in (1.0, 0.3):
            np.testing.assert_allclose(flow.fft.fftfreq(n, d).numpy(),
                                       torch.fft.fftfreq(n, d).numpy(), rtol=1e-6)
            np.testing.assert_allclose(flow.fft.rfftfreq(n, d).numpy(),
                                       torch.fft.rfftfreq(n, d).numpy(), rtol=1e-6)
    assert flow.fft.fftfreq(4, dtype=flow.float64).dtype is flow.float64
    x = np.arange(30.0).reshape(5, 6)
    for dim in (None, 0, (1,), (0, -1)):
        for name in ("fftshift", "ifftshift"):
            got = getattr(flow.fft, name)(flow.tensor(x), dim)
            want = getattr(torch.fft, name)(torch.tensor(x), dim)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    y = flow.fft.ifftshift(flow.fft.fftshift(flow.tensor(C)))
    np.testing.assert_array_equal(y.numpy(), C)
    with pytest.raises(RuntimeError, match="n must be positive"):
        flow.fft.fftfreq(0)
