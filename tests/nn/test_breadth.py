"""nn-layer breadth (issue #16): adaptive max pooling, max unpooling, padding layers,
transposed convolution, pixel shuffle, instance / RMS norm, channel dropout, affine grid,
extra losses; forward against PyTorch, gradients by finite differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck, to_torch, torch

TF = torch.nn.functional
RNG = np.random.default_rng(3)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _close(a, b, **kw):
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **dict(dict(rtol=1e-5,
                                                                           atol=1e-6), **kw))


@pytest.mark.parametrize("n,shape,size", [(1, (2, 3, 7), 3), (2, (2, 3, 10, 11), (3, 4)),
                                           (3, (1, 2, 5, 6, 7), (2, 3, 4)),
                                           (2, (3, 5, 6), (None, 2))])
def test_adaptive_max_pool_matches_torch(n, shape, size):
    x = _rand(*shape)
    fn = getattr(flow.nn.functional, f"adaptive_max_pool{n}d")
    y, i = fn(flow.tensor(x), size, return_indices=True)
    ty, ti = getattr(TF, f"adaptive_max_pool{n}d")(to_torch(x), size, return_indices=True)
    _close(y, ty)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    m = getattr(flow.nn, f"AdaptiveMaxPool{n}d")(size)
    _close(m(flow.tensor(x)), ty)


def test_adaptive_max_pool_grad():
    x = _rand(2, 2, 5, 7)
    gradcheck(lambda t: flow.nn.functional.adaptive_max_pool2d(t, (2, 3)), x)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_inverts_max_pool(n):
    shape = (2, 3) + (6,) * n
    x = _rand(*shape)
    pool = getattr(TF, f"max_pool{n}d")
    ty, ti = pool(to_torch(x), 2, return_indices=True)
    unpool = getattr(flow.nn.functional, f"max_unpool{n}d")
    out = unpool(flow.tensor(ty.numpy()), flow.tensor(ti.numpy()), 2)
    _close(out, getattr(TF, f"max_unpool{n}d")(ty, ti, 2))
    m = getattr(flow.nn, f"MaxUnpool{n}d")(2)
    _close(m(flow.tensor(ty.numpy()), flow.tensor(ti.numpy()), output_size=shape),
           getattr(TF, f"max_unpool{n}d")(ty, ti, 2, output_size=shape))
    idx = flow.tensor(ti.numpy())
    gradcheck(lambda t: unpool(t, idx, 2), ty.detach().numpy().astype(np.float64))


@pytest.mark.parametrize("name,args", [("ConstantPad1d", ((1, 2), 3.5)),
                                       ("ConstantPad2d", (2, 0.5)),
                                       ("ConstantPad3d", ((1, 0, 2, 1, 0, 1), -1.0)),
                                       ("ZeroPad2d", ((1, 2, 0, 3),)),
                                       ("ReflectionPad1d", (2,)),
                                       ("ReflectionPad2d", ((1, 2, 2, 0),)),
                                       ("ReplicationPad1d", ((3, 1),)), ("ReplicationPad2d", (2,)),
                                       ("ReplicationPad3d", (1,))])
def test_padding_layers_match_torch(name, args):
    nd = 5 if name.endswith("3d") else 4 if name.endswith("2d") else 3
    x = _rand(*(2, 3, 4, 5, 6)[:nd])
    _close(getattr(flow.nn, name)(*args)(flow.tensor(x)), getattr(torch.nn, name)(*args)(
        to_torch(x)))
    if name.startswith(("Reflection", "Replication")):
        gradcheck(lambda t: getattr(flow.nn, name)(*args)(t), x[:1, :2])


def test_constant_pad_keeps_integer_dtype():
    x = RNG.integers(-5, 5, (2, 3, 4))
    y = flow.nn.ConstantPad1d(2, 7)(flow.tensor(x))
    assert y.dtype == flow.int64
    np.testing.assert_array_equal(y.numpy(), np.pad(x, ((0, 0), (0, 0), (2, 2)),
                                                    constant_values=7))


@pytest.mark.parametrize("n,stride,padding,out_pad,groups,dilation", [
    (1, 2, 1, 1, 1, 1), (2, (2, 1), (1, 0), (1, 0), 2, 1), (2, 1, 0, 0, 1, 2),
    (3, 2, 1, 0, 1, 1)])
def test_conv_transpose_matches_torch(n, stride, padding, out_pad, groups, dilation):
    x = _rand(*((2, 4) + (5, 4, 3)[:n]))
    w = _rand(*((4, 6 // groups) + (3, 2, 2)[:n]))
    b = _rand(6)
    fn = getattr(flow.nn.functional, f"conv_transpose{n}d")
    y = fn(flow.tensor(x), flow.tensor(w), flow.tensor(b), stride, padding, out_pad, groups,
           dilation)
    ty = getattr(TF, f"conv_transpose{n}d")(to_torch(x), to_torch(w), to_torch(b), stride,
                                            padding, out_pad, groups, dilation)
    _close(y, ty, atol=1e-5)
    gradcheck(lambda a, c, d: fn(a, c, d, stride, padding, out_pad, groups, dilation),
              x[:1], w, b)


def test_conv_transpose_module_output_size():
    flow.manual_seed(0)
    m = flow.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1)
    assert tuple(m.weight.shape) == (3, 4, 3, 3)
    x = flow.randn(1, 3, 5, 5)
    assert tuple(m(x).shape) == (1, 4, 9, 9)
    assert tuple(m(x, output_size=(10, 10)).shape) == (1, 4, 10, 10)
    with pytest.raises(ValueError, match="output size"):
        m(x, output_size=(12, 12))


@pytest.mark.parametrize("h,w", [(2, 2), (2, 3)])
def test_pixel_shuffle(h, w):
    x = _rand(2, 2 * h * w, 3, 4)
    y = flow.nn.PixelShuffle(h_upscale_factor=h, w_upscale_factor=w)(flow.tensor(x))
    ref = x.reshape(2, 2, h, w, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 3 * h, 4 * w)
    np.testing.assert_array_equal(y.numpy(), ref)
    if h == w:
        _close(flow.nn.functional.pixel_unshuffle(y, h), TF.pixel_unshuffle(to_torch(ref), h))
    with pytest.raises(ValueError, match="divisible"):
        flow.nn.PixelShuffle(3)(flow.tensor(x))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_instance_norm_matches_torch(n):
    x = _rand(*((3, 4) + (5, 4, 3)[:n]))
    for affine, track in [(False, False), (True, True)]:
        m = getattr(flow.nn, f"InstanceNorm{n}d")(4, affine=affine, track_running_stats=track)
        tm = getattr(torch.nn, f"InstanceNorm{n}d")(4, affine=affine, track_running_stats=track)
        if affine:
            w, b = _rand(4), _rand(4)
            m.weight.data = flow.tensor(w.astype(np.float32))
            m.bias.data = flow.tensor(b.astype(np.float32))
            tm.weight.data, tm.bias.data = to_torch(w).float(), to_torch(b).float()
        xf = x.astype(np.float32)
        _close(m(flow.tensor(xf)), tm(to_torch(xf)), atol=1e-5)
        if track:
            _close(m.running_mean, tm.running_mean, atol=1e-6)
            _close(m.running_var, tm.running_var, atol=1e-6)
            m.eval()
            tm.eval()
            _close(m(flow.tensor(xf)), tm(to_torch(xf)), atol=1e-5)
    gradcheck(lambda t: flow.nn.functional.instance_norm(t), x[:2])


def test_rms_norm():
    x, w = _rand(2, 3, 4), _rand(4)
    y = flow.nn.functional.rms_norm(flow.tensor(x), 4, flow.tensor(w), 1e-6)
    ref = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-10)
    _close(flow.nn.RMSNorm(4, eps=1e-6)(flow.tensor(x)), TF.rms_norm(to_torch(x), (4,),
                                                                  eps=1e-6))
    gradcheck(lambda a, b: flow.nn.functional.rms_norm(a, (3, 4), b), x, _rand(3, 4))


def test_channel_dropout_masks_whole_channels():
    flow.manual_seed(1)
    x = flow.ones(4, 6, 3, 3)
    y = flow.nn.Dropout2d(0.5)(x).numpy()
    per_channel = y.reshape(4, 6, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # one value per channel
    assert set(np.unique(y)) <= {0.0, 2.0}
    m = flow.nn.Dropout3d(0.5)
    m.eval()
    assert m(x) is x or np.array_equal(m(x).numpy(), x.numpy())
    assert np.array_equal(flow.nn.functional.dropout1d(x[:, :, 0], 1.0).numpy(),
                          np.zeros((4, 6, 3)))


def test_dropout_generator_and_addend():
    x, a = flow.ones(50, 20), flow.full((50, 20), 3.0)
    g1, g2 = flow.Generator(), flow.Generator()
    g1.manual_seed(7)
    g2.manual_seed(7)
    y1 = flow.nn.Dropout(0.3, generator=g1)(x, a)
    y2 = flow.nn.Dropout(0.3, generator=g2)(x, a)
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
    np.testing.assert_allclose(np.unique(y1.numpy() - 3.0), [0.0, 1 / 0.7], rtol=1e-6)


@pytest.mark.parametrize("size,align", [((2, 3, 4, 5), False), ((2, 3, 4, 5), True),
                                        ((1, 2, 3, 4, 2), False)])
def test_affine_grid(size, align):
    theta = _rand(size[0], len(size) - 2, len(size) - 1)
    y = flow.nn.functional.affine_grid(flow.tensor(theta), size, align_corners=align)
    _close(y, TF.affine_grid(to_torch(theta), size, align_corners=align), atol=1e-10)
    gradcheck(lambda t: flow.nn.functional.affine_grid(t, size, align), theta)


def test_margin_ranking_and_triplet_losses():
    a, b, t = _rand(6), _rand(6), np.sign(_rand(6))
    for red in ("none", "mean", "sum"):
        _close(flow.nn.MarginRankingLoss(0.3, reduction=red)(
            flow.tensor(a), flow.tensor(b), flow.tensor(t)),
            torch.nn.MarginRankingLoss(0.3, reduction=red)(to_torch(a), to_torch(b),
                                                            to_torch(t)))
    x, p, n = _rand(4, 5), _rand(4, 5), _rand(4, 5)
    for swap in (False, True):
        _close(flow.nn.TripletMarginLoss(swap=swap)(flow.tensor(x), flow.tensor(p),
                                                    flow.tensor(n)),
               torch.nn.TripletMarginLoss(swap=swap)(to_torch(x), to_torch(p), to_torch(n)))
    gradcheck(lambda u, v, w: flow.nn.functional.triplet_margin_loss(u, v, w, p=3.0), x, p, n)


def test_sparse_softmax_cross_entropy_and_gumbel():
    logits, labels = _rand(5, 7), RNG.integers(0, 7, 5)
    y = flow.nn.functional.sparse_softmax_cross_entropy(flow.tensor(labels), flow.tensor(logits))
    _close(y, TF.cross_entropy(to_torch(logits), to_torch(labels), reduction="none"))
    flow.manual_seed(0)
    soft = flow.nn.functional.gumbel_softmax(flow.tensor(logits), tau=0.5)
    np.testing.assert_allclose(soft.numpy().sum(-1), np.ones(5), rtol=1e-12)
    x = flow.tensor(logits, requires_grad=True)
    hard = flow.nn.functional.gumbel_softmax(x, hard=True, dim=0)
    assert np.array_equal(hard.numpy().sum(0), np.ones(7))
    assert set(np.unique(hard.numpy())) == {0.0, 1.0}
    hard.sum().backward()  # straight-through: the soft sample's gradient (sums to ~0)
    np.testing.assert_allclose(x.grad.numpy(), 0.0, atol=1e-12)


@pytest.mark.parametrize("pool", [lambda t: flow.nn.functional.avg_pool2d(t, 2),
                                  lambda t: flow.nn.functional.adaptive_avg_pool2d(t, 3),
                                  lambda t: flow.nn.functional.max_pool2d(t, 2),
                                  lambda t: flow.nn.functional.adaptive_max_pool2d(t, 3)])
def test_pool_double_backward_wrt_input_and_seed(pool):
    """dx depends on x in the graph (zero derivative, as in PyTorch) and, with create_graph,
    on the seed gradient it was computed from."""
    x = flow.tensor(_rand(1, 2, 6, 6), requires_grad=True)
    y = pool(x)
    gy = flow.tensor(_rand(*y.shape), requires_grad=True)
    (dx,) = flow.autograd.grad(y, x, gy, create_graph=True)
    gx = flow.tensor(_rand(*x.shape))
    ddx, ddy = flow.autograd.grad(dx, [x, gy], gx)
    np.testing.assert_array_equal(ddx.numpy(), 0.0)
    np.testing.assert_allclose((ddy.numpy() * gy.detach().numpy()).sum(),
                               (gx.numpy() * dx.detach().numpy()).sum(), rtol=1e-10)


def test_conv_and_conv_transpose_with_empty_batch():
    x = flow.zeros(0, 2, 5, 4, requires_grad=True)
    w = flow.tensor(_rand(3, 2, 3, 2).astype(np.float32), requires_grad=True)
    y = flow.nn.functional.conv2d(x, w, flow.ones(3))
    ref = TF.conv2d(torch.zeros(0, 2, 5, 4), torch.zeros(3, 2, 3, 2))
    assert tuple(y.shape) == tuple(ref.shape)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 2, 5, 4)
    np.testing.assert_array_equal(w.grad.numpy(), 0.0)
    wt = flow.tensor(_rand(2, 9, 3, 3).astype(np.float32))
    out = flow.nn.functional.conv_transpose2d(flow.zeros(0, 2, 2, 3), wt, padding=2)
    assert tuple(out.shape) == (0, 9, 0, 1)  # empty output allowed for an empty batch, as torch
    with pytest.raises(ValueError, match="not positive"):
        flow.nn.functional.conv_transpose2d(flow.zeros(1, 2, 2, 3), wt, padding=2)


@pytest.mark.parametrize("nd,mode", [(2, "bilinear"), (2, "nearest"), (2, "bicubic"),
                                     (3, "bilinear"), (3, "nearest")])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sample_matches_torch(nd, mode, padding_mode, align_corners):
    x = _rand(*((2, 3) + (3, 4, 5)[:nd]))
    g = RNG.uniform(-1.4, 1.4, (2,) + (2, 3, 2)[:nd] + (nd,))  # some points outside
    fx, fg = flow.tensor(x, requires_grad=True), flow.tensor(g, requires_grad=True)
    y = flow.nn.functional.grid_sample(fx, fg, mode, padding_mode, align_corners)
    tx, tg = to_torch(x, requires_grad=True), to_torch(g, requires_grad=True)
    ty = TF.grid_sample(tx, tg, mode, padding_mode, align_corners)
    _close(y, ty, atol=1e-10)
    p = _rand(*ty.shape)
    (y * flow.tensor(p)).sum().backward()
    (ty * to_torch(p)).sum().backward()
    _close(fx.grad, tx.grad, atol=1e-10)
    grid_grad = np.zeros(g.shape) if fg.grad is None else fg.grad.numpy()  # nearest: none
    np.testing.assert_allclose(grid_grad, tg.grad.numpy(), atol=1e-8)


@pytest.mark.parametrize("name,kw", [("smooth_l1_loss", {"beta": 0.7}), ("kl_div", {}),
                                     ("kl_div", {"log_target": True, "reduction": "batchmean"}),
                                     ("binary_cross_entropy_with_logits", {}),
                                     ("mse_loss", {"reduction": "sum"}), ("l1_loss", {}),
                                     ("huber_loss", {"delta": 0.5})])
def test_loss_double_backward_matches_torch(name, kw):
    x, t = _rand(3, 4), RNG.uniform(0.1, 1.0, (3, 4))
    fx, ft = flow.tensor(x, requires_grad=True), flow.tensor(t, requires_grad=True)
    gx, gt = flow.autograd.grad(getattr(flow.nn.functional, name)(fx, ft, **kw), [fx, ft],
                                create_graph=True)
    u, v = _rand(3, 4), _rand(3, 4)
    ddx, ddt = flow.autograd.grad([gx, gt], [fx, ft], [flow.tensor(u), flow.tensor(v)])
    tx, tt = to_torch(x, requires_grad=True), to_torch(t, requires_grad=True)
    tgx, tgt = torch.autograd.grad(getattr(TF, name)(tx, tt, **kw), [tx, tt], create_graph=True)
    tdx, tdt = torch.autograd.grad([tgx, tgt], [tx, tt], [to_torch(u), to_torch(v)],
                                   allow_unused=True)
    zero = torch.zeros(3, 4, dtype=torch.float64)
    _close(ddx, zero if tdx is None else torch.add(zero, tdx))  # (l1: torch's ZeroTensor)
    _close(ddt, zero if tdt is None else torch.add(zero, tdt))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_with_logits_double_backward_with_weights(reduction):
    x, t = _rand(3, 4), RNG.uniform(0, 1, (3, 4))
    w, pw = RNG.uniform(0.5, 2, (4,)), RNG.uniform(1, 3, (4,))
    fx, ft = flow.tensor(x, requires_grad=True), flow.tensor(t, requires_grad=True)
    loss = flow.nn.BCEWithLogitsLoss(flow.tensor(w), pos_weight=flow.tensor(pw),
                                     reduction=reduction)(fx, ft)
    seed = _rand(*loss.shape)
    gx, gt = flow.autograd.grad(loss, [fx, ft], flow.tensor(seed), create_graph=True)
    u, v = _rand(3, 4), _rand(3, 4)
    ddx, ddt = flow.autograd.grad([gx, gt], [fx, ft], [flow.tensor(u), flow.tensor(v)])
    tx, tt = to_torch(x, requires_grad=True), to_torch(t, requires_grad=True)
    tl = torch.nn.BCEWithLogitsLoss(to_torch(w), pos_weight=to_torch(pw),
                                    reduction=reduction)(tx, tt)
    tgx, tgt = torch.autograd.grad(tl, [tx, tt], to_torch(seed), create_graph=True)
    tdx, tdt = torch.autograd.grad([tgx, tgt], [tx, tt], [to_torch(u), to_torch(v)])
    _close(ddx, tdx)
    _close(ddt, tdt)
