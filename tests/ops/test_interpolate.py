"""F.interpolate / F.upsample and the nn.Upsample layers (ops upsample / upsample_grad),
compared with PyTorch in values and gradients; double backward by finite differences in
float64; eager against nn.Graph."""
import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

F = flow.nn.functional
rng = np.random.default_rng(0)

CASES = [
    ((2, 3, 5), dict(scale_factor=2.0, mode="linear")),
    ((2, 3, 5), dict(size=9, mode="linear", align_corners=True)),
    ((2, 3, 9), dict(size=4, mode="linear")),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="bilinear")),
    ((1, 2, 4, 5), dict(scale_factor=1.7, mode="bilinear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=1.7, mode="bicubic")),
    ((1, 2, 6, 5), dict(scale_factor=(0.6, 2.3), mode="bicubic", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=2.5, mode="nearest")),
    ((2, 1, 4, 5), dict(size=(3, 11), mode="nearest")),
    ((2, 1, 4, 5), dict(size=(3, 11), mode="nearest-exact")),
    ((2, 3, 7), dict(scale_factor=0.5, mode="nearest")),
    ((1, 2, 3, 4, 5), dict(scale_factor=1.5, mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(2, 5, 3), mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=(2, 1, 3), mode="nearest")),
    ((1, 2, 3, 4, 5), dict(size=(2, 5, 3), mode="area")),
    ((1, 2, 7, 5), dict(scale_factor=0.5, mode="area")),
    ((1, 2, 4, 5), dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True)),
    ((1, 2, 4, 5), dict(scale_factor=1.3, mode="nearest", recompute_scale_factor=True)),
    # dims longer than the dense-matrix limit: the adjoint sums with add.reduceat
    ((1, 2, 600), dict(scale_factor=1.5, mode="linear")),
    ((1, 1, 2, 530), dict(size=(3, 700), mode="bicubic")),
    ((1, 2, 600), dict(size=257, mode="nearest")),
]


@pytest.mark.parametrize("shape,kw", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpolate_matches_torch(shape, kw, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    x = flow.tensor(a, requires_grad=True)
    y = F.interpolate(x, **kw)
    tx = torch.tensor(a, requires_grad=True)
    ty = torch.nn.functional.interpolate(tx, **kw)
    assert tuple(y.shape) == tuple(ty.shape) and y.dtype == x.dtype
    g = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    (y * flow.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    # float32 source positions near 600 are exact to ~3e-5 (PyTorch may round them
    # differently, e.g. with a fused multiply-add), hence the float32 tolerance
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("kw", [dict(scale_factor=1.5, mode="bicubic"),
                                dict(size=(3, 7), mode="bilinear", align_corners=True),
                                dict(scale_factor=2, mode="nearest")])
def test_interpolate_double_backward(kw):
    a = rng.standard_normal((1, 2, 4, 3))
    gradcheck(lambda x: F.interpolate(x, **kw), a)
    # the input gradient is upsample_grad(g), linear in g: its gradient w.r.t. g along h is
    # interpolate(h)
    x = flow.tensor(a, requires_grad=True)
    y = F.interpolate(x, **kw)
    g = flow.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)
    dx = flow.autograd.grad((y * g).sum(), x, create_graph=True)[0]
    h = rng.standard_normal(a.shape)
    (dx * flow.tensor(h)).sum().backward()
    want = torch.nn.functional.interpolate(torch.tensor(h), **kw)
    np.testing.assert_allclose(g.grad.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_half_precision_and_integer_nearest():
    a = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    y = F.interpolate(flow.tensor(a).half(), scale_factor=2, mode="bilinear")
    want = torch.nn.functional.interpolate(torch.tensor(a), scale_factor=2, mode="bilinear")
    assert y.dtype == flow.float16
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.numpy(), atol=2e-3)
    img = rng.integers(0, 255, (1, 3, 4, 5)).astype(np.uint8)
    got = F.interpolate(flow.tensor(img), size=(7, 9))
    np.testing.assert_array_equal(
        got.numpy(), torch.nn.functional.interpolate(torch.tensor(img), size=(7, 9)).numpy())


def test_empty_batch_and_permuted_input():
    x = flow.zeros(0, 2, 3, 3, requires_grad=True)
    y = F.interpolate(x, scale_factor=2, mode="bicubic")
    y.sum().backward()
    assert y.shape == (0, 2, 6, 6) and x.grad.shape == (0, 2, 3, 3)
    a = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    got = F.interpolate(flow.tensor(a).permute(1, 3, 0, 2), scale_factor=1.7, mode="bilinear")
    want = torch.nn.functional.interpolate(torch.tensor(a).permute(1, 3, 0, 2),
                                           scale_factor=1.7, mode="bilinear")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_upsample_modules_match_torch():
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    pairs = [(flow.nn.Upsample(scale_factor=2, mode="bicubic"),
              torch.nn.Upsample(scale_factor=2, mode="bicubic")),
             (flow.nn.Upsample(size=(5, 3)), torch.nn.Upsample(size=(5, 3))),
             (flow.nn.UpsamplingBilinear2d(scale_factor=1.5),
              torch.nn.UpsamplingBilinear2d(scale_factor=1.5)),
             (flow.nn.UpsamplingNearest2d(size=(8, 10)),
              torch.nn.UpsamplingNearest2d(size=(8, 10)))]
    for ours, ref in pairs:
        np.testing.assert_allclose(ours(flow.tensor(a)).numpy(), ref(torch.tensor(a)).numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert "scale_factor=2.0, mode='bicubic'" in repr(pairs[0][0])
    np.testing.assert_array_equal(
        F.upsample(flow.tensor(a), scale_factor=2).numpy(),
        torch.nn.functional.interpolate(torch.tensor(a), scale_factor=2).numpy())


def test_interpolate_in_graph_matches_eager():
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)

    class Net(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = flow.nn.Conv2d(3, 2, 3, padding=1)
            self.up = flow.nn.Upsample(scale_factor=2, mode="bilinear")

        def forward(self, x):
            return F.interpolate(self.up(self.conv(x)), size=(5, 7), mode="bicubic")

    flow.manual_seed(0)
    eager, graph_net = Net(), Net()
    graph_net.load_state_dict(eager.state_dict())
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1)
    opt_g = flow.optim.SGD(graph_net.parameters(), lr=0.1)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.net = graph_net
            self.add_optimizer(opt_g)

        def build(self, x):
            loss = (self.net(x) ** 2).mean()
            loss.backward()
            return loss

    train = Train()
    for _ in range(2):
        loss_e = (eager(flow.tensor(a)) ** 2).mean()
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        loss_g = train(flow.tensor(a))
        np.testing.assert_allclose(loss_g.numpy(), loss_e.numpy(), rtol=1e-5)
    np.testing.assert_allclose(graph_net.conv.weight.numpy(), eager.conv.weight.numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.timeout(60)
def test_interpolate_errors():
    x = flow.ones(1, 1, 4, 4)
    with pytest.raises(ValueError, match="mode 'linear' needs a 3-d input"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners can only be set"):
        F.interpolate(x, scale_factor=2, mode="nearest", align_corners=True)
    with pytest.raises(ValueError, match="size .* must have 2 values"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="mode must be one of"):
        F.interpolate(x, size=3, mode="cubic")
    with pytest.raises(ValueError, match="output size .* must be positive"):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(Exception, match="upsample: mode 'linear' needs a floating-point"):
        F.interpolate(flow.ones(1, 1, 4, 4, dtype=flow.int64), scale_factor=2,
                      mode="bilinear")
