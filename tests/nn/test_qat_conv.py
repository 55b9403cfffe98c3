"""nn.QatConv1d/2d/3d: the convolution of the fake-quantized input and weight (NumPy formulas
for the observers and fake quantization, PyTorch's convolution), gradients passed straight
through the fake quantization, the input observer's moving average, inside nn.Graph."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import FnGraph, torch

RNG = np.random.default_rng(21)


def _fake_quant(x, bit, scheme, per_layer=True, scale=None, zp=None):
    """Fake quantization of ``x`` with the min-max scale (or the given one), in NumPy."""
    rows = x.reshape(1 if per_layer else x.shape[0], -1).astype(np.float64)
    if scale is None:
        if scheme == "symmetric":
            scale, zp = np.abs(rows).max(1) / (2.0 ** (bit - 1) - 1), np.zeros(len(rows))
        else:
            lo, hi = rows.min(1), rows.max(1)
            scale = (hi - lo) / (2.0 ** bit - 1)
            zp = -np.rint(lo / scale)
    s, z = np.asarray(scale)[:, None], np.asarray(zp)[:, None]
    if scheme == "symmetric":
        q = np.clip(np.rint(rows / s), -(2 ** (bit - 1)), 2 ** (bit - 1) - 1)
    else:
        q = np.clip(np.rint(rows / s + z), 0, 2 ** bit - 1)
    return ((q - z) * s).reshape(x.shape)


CASES = [(flow.nn.QatConv1d, torch.nn.functional.conv1d, (2, 3, 9), dict(stride=2)),
         (flow.nn.QatConv2d, torch.nn.functional.conv2d, (2, 3, 6, 5), dict(padding=1)),
         (flow.nn.QatConv3d, torch.nn.functional.conv3d, (1, 2, 4, 5, 4), dict(groups=2))]


@pytest.mark.parametrize("cls,tconv,shape,kw", CASES)
@pytest.mark.parametrize("scheme,bit,per_layer", [("symmetric", 8, True), ("affine", 4, False)])
def test_qat_conv_matches_the_fake_quantized_convolution(cls, tconv, shape, kw, scheme, bit,
                                                         per_layer):
    m = cls(shape[1], 4, 3, quantization_bit=bit, quantization_scheme=scheme,
            weight_quant_per_layer=per_layer, **kw)
    x = RNG.standard_normal(shape).astype(np.float32)
    fx = flow.tensor(x, requires_grad=True)
    y = m(fx)
    w = m.weight.numpy()
    qx = _fake_quant(x, bit, scheme)  # the first training step: the batch's own range
    qw = _fake_quant(w, bit, scheme, per_layer)
    tx = torch.tensor(qx, requires_grad=True)
    tw = torch.tensor(qw, requires_grad=True)
    tb = torch.tensor(m.bias.numpy().astype(np.float64), requires_grad=True)
    ty = tconv(tx, tw, tb, **kw)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    g = RNG.standard_normal(tuple(ty.shape))
    y.backward(flow.tensor(g.astype(np.float32)))
    ty.backward(torch.tensor(g))
    # fake quantization passes the gradient straight through to the input and the weight
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.weight.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.bias.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_input_range_is_a_moving_average_while_training():
    m = flow.nn.QatConv1d(2, 3, 3, input_quant_momentum=0.9, bias=False)
    a, b = RNG.standard_normal((1, 2, 8)), 3 * RNG.standard_normal((1, 2, 8))
    m(flow.tensor(a.astype(np.float32)))
    m(flow.tensor(b.astype(np.float32)))
    want = 0.9 * np.abs(a).max() + 0.1 * np.abs(b).max()
    np.testing.assert_allclose(m.input_min_max_observer.moving_max.numpy(), [want], rtol=1e-5)
    m.eval()
    y = m(flow.tensor(b.astype(np.float32)))  # eval: the stored range quantizes the input
    qx = _fake_quant(b, 8, "symmetric", scale=[want / 127], zp=[0.0])
    qw = _fake_quant(m.weight.numpy(), 8, "symmetric")
    ty = torch.nn.functional.conv1d(torch.tensor(qx), torch.tensor(qw))
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.input_min_max_observer.moving_max.numpy(), [want], rtol=1e-5)
    assert "current_train_step" in dict(m.named_buffers())


def test_qat_conv_in_graph_matches_eager():
    flow.manual_seed(0)
    m = flow.nn.QatConv2d(2, 3, 3, padding=1)
    x = flow.tensor(RNG.standard_normal((2, 2, 5, 5)).astype(np.float32))
    m.eval()  # eval: the observer's buffers don't change between the two runs
    m.input_min_max_observer.moving_max.fill_(2.5)
    m.input_min_max_observer.moving_min.fill_(2.5)
    np.testing.assert_allclose(FnGraph(m)(x).numpy(), m(x).numpy(), rtol=1e-6)


def test_bad_quantization_settings_are_named():
    with pytest.raises(ValueError, match="QatConv2d: quantization_scheme must be"):
        flow.nn.QatConv2d(2, 3, 3, quantization_scheme="asym")
    with pytest.raises(ValueError, match="QatConv1d: quantization_bit must be in"):
        flow.nn.QatConv1d(2, 3, 3, quantization_bit=9)
