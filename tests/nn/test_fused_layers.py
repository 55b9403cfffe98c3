"""OneFlow's fused layers as composites: bias_add, fused_matmul_bias, fused_mlp,
FusedBatchNorm*d and RMSLayerNorm, against NumPy/PyTorch, gradients by finite differences."""
import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
rng = np.random.default_rng(0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_bias_add(axis):
    x = rng.standard_normal((3, 4, 5))
    b = rng.standard_normal(x.shape[axis])
    shape = [1, 1, 1]
    shape[axis] = -1
    np.testing.assert_allclose(flow.bias_add(flow.tensor(x), flow.tensor(b), axis).numpy(),
                               x + b.reshape(shape))
    gradcheck(lambda t, u: flow._C.bias_add(t, u, axis=axis), x, b)
    with pytest.raises(ValueError, match="bias_add: bias must be 1-d"):
        flow.bias_add(flow.tensor(x), flow.tensor(b[:2]), axis)


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0)])
def test_fused_matmul_bias(alpha, beta):
    x, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4))
    b, z = rng.standard_normal(5), rng.standard_normal((2, 3, 5))
    y = flow._C.fused_matmul_bias(flow.tensor(x), flow.tensor(w), flow.tensor(b),
                                  flow.tensor(z), alpha=alpha, beta=beta)
    np.testing.assert_allclose(y.numpy(), alpha * x @ w.T + b + beta * z, rtol=1e-12)
    gradcheck(lambda *a: flow._C.fused_matmul_bias(*a, alpha=alpha, beta=beta), x, w, b, z)


@pytest.mark.parametrize("skip", [True, False])
def test_fused_mlp(skip):
    x = rng.standard_normal((4, 3))
    ws = [rng.standard_normal((6, 3)), rng.standard_normal((2, 6))]
    bs = [rng.standard_normal(6), rng.standard_normal(2)]
    h = np.maximum(x @ ws[0].T + bs[0], 0)
    want = h @ ws[1].T + bs[1]
    want = want if skip else np.maximum(want, 0)
    out = flow._C.fused_mlp(flow.tensor(x), [flow.tensor(w) for w in ws],
                            [flow.tensor(b) for b in bs], skip_final_activation=skip)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    gradcheck(lambda a, w0, w1, b0, b1: flow._C.fused_mlp(a, [w0, w1], [b0, b1], skip),
              x, ws[0], ws[1], bs[0], bs[1])


@needs_torch
@pytest.mark.parametrize("with_addend", [True, False])
def test_fused_batch_norm_like_torch(with_addend):
    x = rng.standard_normal((2, 3, 4, 4))
    z = rng.standard_normal(x.shape)
    m = flow.nn.FusedBatchNorm2d(3).to(flow.float64)
    tm = torch.nn.BatchNorm2d(3).double()
    xs = [flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)]
    zs = [flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)]
    y = m(xs[0], zs[0] if with_addend else None)
    ty = tm(xs[1])
    ty = torch.relu(ty + zs[1] if with_addend else ty)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(x.shape)
    y.backward(flow.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(xs[0].grad.numpy(), xs[1].grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-8)
    np.testing.assert_allclose(m.running_var.numpy(), tm.running_var.numpy(), rtol=1e-10)
    if with_addend:
        np.testing.assert_allclose(zs[0].grad.numpy(), zs[1].grad.numpy())


def test_rms_layer_norm():
    with pytest.warns(DeprecationWarning):
        m = flow.nn.RMSLayerNorm(5)
    assert m.variance_epsilon == 1e-6
    x = rng.standard_normal((3, 5))
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(m(flow.tensor(x)).numpy(), want, rtol=1e-6)
    gradcheck(lambda t: m.to(flow.float64)(t), x)
