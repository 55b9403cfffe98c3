"""Complex tensors (complex64/complex128): creation, promotion, arithmetic, comparisons, mean,
casts, conj/real/imag, and gradients with PyTorch's convention (conjugate Wirtinger
derivatives), all compared with PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch

RNG = np.random.default_rng(11)


def _c(shape, dtype=np.complex128):
    return (RNG.uniform(-2, 2, size=shape) + 1j * RNG.uniform(-2, 2, size=shape)).astype(dtype)


def test_dtypes_and_promotion():
    assert flow.tensor(_c(3, np.complex64)).dtype is flow.complex64
    assert flow.tensor(_c(3)).dtype is flow.complex128
    assert flow.cfloat is flow.complex64 and flow.cdouble is flow.complex128
    assert flow.complex64.is_complex and not flow.complex64.is_floating_point
    pairs = [(flow.float64, flow.complex64), (flow.float32, flow.complex64),
             (flow.int64, flow.complex128), (flow.complex64, flow.complex128)]
    for a, b in pairs:
        want = torch.promote_types(getattr(torch, a.name), getattr(torch, b.name))
        assert flow.promote_types(a, b).name == str(want).split(".")[1]
    x64 = flow.ones(2, dtype=flow.float64)
    assert (x64 + 1j).dtype is flow.complex128
    assert (flow.ones(2) * 2j).dtype is flow.complex64
    assert (flow.tensor([1, 2]) + 1j).dtype is flow.complex64


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_binary_forward_and_gradients_match_torch(name):
    a, b = _c((2, 3)), _c((3,))
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.tensor(b, requires_grad=True)
    out, tout = getattr(flow, name)(x, y), getattr(torch, name)(tx, ty)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12)
    g = _c((2, 3))
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_scalar_forms_match_torch(name):
    a = _c((4,))
    for s, rev in ((1.5 - 0.5j, False), (2.0, False), (0.5 + 2j, True)):
        x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        fn, tfn = getattr(flow, name), getattr(torch, name)
        out = fn(s, x) if rev else fn(x, s)
        tout = tfn(torch.tensor(s), tx) if rev else tfn(tx, s)
        np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12)
        out.backward(flow.tensor(np.ones(4, complex)))
        tout.backward(torch.ones(4, dtype=torch.complex128))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_real_and_complex_inputs_mix():
    a, b = RNG.uniform(-1, 1, size=(3,)), _c((3,))
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b)
    tx = torch.tensor(a, requires_grad=True)
    out, tout = x * y, tx * torch.tensor(b)
    assert out.dtype is flow.complex128
    out.backward(flow.tensor(_c(3) * 0 + 1))
    tout.backward(torch.ones(3, dtype=torch.complex128))
    assert x.grad.dtype is flow.float64  # the real part of the complex gradient
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_cast_sqrt_mean_and_comparisons():
    a = RNG.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    x, tx = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    c, tc = x.to(flow.complex64), tx.to(torch.complex64)
    g = _c((2, 3), np.complex64)
    c.backward(flow.tensor(g))
    tc.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    z = _c((2, 3))
    fz, tz = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    s, ts = flow.sqrt(fz).mean(), torch.sqrt(tz).mean()
    np.testing.assert_allclose(s.numpy(), ts.detach().numpy(), rtol=1e-12)
    s.backward(flow.tensor(np.array(1 + 0.5j)))
    ts.backward(torch.tensor(1 + 0.5j, dtype=torch.complex128))
    np.testing.assert_allclose(fz.grad.numpy(), tz.grad.numpy(), rtol=1e-12)
    w = z.copy()
    w[0, 0] += 1j
    assert flow.eq(flow.tensor(z), flow.tensor(w)).tolist() == (torch.tensor(z) ==
                                                               torch.tensor(w)).tolist()
    assert flow.ne(flow.tensor(z), flow.tensor(w)).numpy().sum() == 1
    assert flow.equal(flow.tensor(z), flow.tensor(z))
    assert not flow.equal(flow.tensor(z), flow.tensor(w))


def test_conj_real_imag_and_their_gradients():
    z, w = _c((3,)), _c((3,))
    for part in ("real", "imag"):
        fz, tz = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
        got, want = getattr(fz, part), getattr(tz, part)
        np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
        assert got.dtype is flow.float64
        (got * flow.tensor([1.0, 2.0, 3.0])).sum().backward()
        (want * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
        np.testing.assert_allclose(fz.grad.numpy(), tz.grad.numpy())
    fz, tz = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    (flow.conj(fz) * flow.tensor(w)).real.sum().backward()
    (torch.conj(tz) * torch.tensor(w)).real.sum().backward()
    np.testing.assert_allclose(fz.grad.numpy(), tz.grad.resolve_conj().numpy(), rtol=1e-12)
    r = flow.ones(2)
    assert flow.conj(r) is r and flow.real(r) is r and not r.is_complex()
    with pytest.raises(Exception, match="imag"):
        flow.imag(r)


def test_requires_grad_rules():
    flow.tensor(_c(2)).requires_grad_()  # complex tensors may require grad
    with pytest.raises(RuntimeError, match="floating point and complex"):
        flow.tensor([1, 2]).requires_grad_()


def test_exp_and_unsupported_ops():
    z = _c((3,))
    fz, tz = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    out, tout = flow.exp(fz), torch.exp(tz)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12)
    out.backward(flow.tensor(z))
    tout.backward(torch.tensor(z))
    np.testing.assert_allclose(fz.grad.numpy(), tz.grad.numpy(), rtol=1e-12)
    # ops without complex support say so instead of computing on the real parts
    for fn in (flow.erf, flow.asin, lambda t: flow.maximum(t, t),
               lambda t: flow.fmod(t, t), lambda t: t < 1, lambda t: flow.clamp(t, 0, 1),
               lambda t: flow.clamp(t, min=t)):
        with pytest.raises(Exception, match="complex tensors are not supported"):
            fn(flow.tensor(z))


@pytest.mark.parametrize("shapes", [((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 2, 3), (3,)),
                                    ((3,), (3,)), ((1, 2, 3), (4, 3, 2))])
def test_matmul_forward_and_gradients_match_torch(shapes):
    a, b = _c(shapes[0]), _c(shapes[1])
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, tout = flow.matmul(x, y), torch.matmul(tx, ty)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=1e-12)
    w = _c(tuple(tout.shape))
    (out * flow.tensor(w)).sum().real.backward()
    (tout * torch.tensor(w)).sum().real.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), atol=1e-12)
