"""nn layers vs PyTorch (weights exchanged through state_dict as NumPy arrays, float64):
forward values, input and parameter gradients, running statistics; plus containers."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.helpers import torch

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def _copy_weights(fmod, tmod) -> None:
    fmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})


def _grad_of(t):
    return None if t.grad is None else t.grad.numpy()


def compare(fmod, tmod, *inputs, train: bool = False, atol: float = 1e-9, rtol: float = 1e-7,
            backward: bool = True, seed: int = 0):
    """Run both modules on the same inputs (float arrays get gradients) and compare outputs,
    input/parameter gradients and buffers."""
    tmod = tmod.double()
    fmod = fmod.double()
    _copy_weights(fmod, tmod)
    fmod.train(train)
    tmod.train(train)
    f_in, t_in = [], []
    for a in inputs:
        if isinstance(a, np.ndarray):
            grad = backward and a.dtype.kind == "f"
            f_in.append(flow.tensor(a, requires_grad=grad))
            t_in.append(torch.tensor(a, requires_grad=grad))
        elif isinstance(a, flow.Tensor):
            f_in.append(a)
            t_in.append(torch.tensor(a.numpy()))
        else:
            f_in.append(a)
            t_in.append(a)
    f_out, t_out = fmod(*f_in), tmod(*t_in)
    f_outs = f_out if isinstance(f_out, tuple) else (f_out,)
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    for fo, to in zip(f_outs, t_outs):
        if to is None:
            assert fo is None
            continue
        assert tuple(fo.shape) == tuple(to.shape)
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=atol,
                                   rtol=rtol)
    for (name, fb), (_, tb) in zip(fmod.named_buffers(), tmod.named_buffers()):
        np.testing.assert_allclose(fb.numpy(), tb.numpy(), atol=atol, rtol=rtol, err_msg=name)
    if not backward:
        return f_outs
    rng = np.random.default_rng(seed)
    f_loss, t_loss = 0, 0
    for fo, to in zip(f_outs, t_outs):
        if to is None or not to.dtype.is_floating_point:
            continue
        g = rng.standard_normal(tuple(to.shape))
        f_loss = f_loss + (fo * flow.tensor(g)).sum()
        t_loss = t_loss + (to * torch.tensor(g)).sum()
    f_loss.backward()
    t_loss.backward()
    for i, (fi, ti) in enumerate(zip(f_in, t_in)):
        if isinstance(ti, torch.Tensor) and ti.requires_grad:
            np.testing.assert_allclose(_grad_of(fi), ti.grad.numpy(), atol=atol * 10,
                                       rtol=rtol * 10, err_msg=f"grad of input {i}")
    t_params = dict(tmod.named_parameters())
    for name, fp in fmod.named_parameters():
        tg = t_params[name].grad
        if tg is None:
            assert fp.grad is None or np.all(fp.grad.numpy() == 0), name
        else:
            np.testing.assert_allclose(_grad_of(fp), tg.numpy(), atol=atol * 10,
                                       rtol=rtol * 10, err_msg=f"grad of {name}")
    return f_outs


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- dense, conv, pooling -----------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    compare(nn.Linear(5, 3, bias=bias), torch.nn.Linear(5, 3, bias=bias), rand(2, 4, 5))


@needs_torch
@pytest.mark.parametrize("kwargs", [
    dict(stride=2, padding=1),
    dict(padding="same", dilation=2, groups=2),
    dict(padding=2, padding_mode="reflect", bias=False),
    dict(padding=1, padding_mode="circular"),
])
def test_conv1d(kwargs):
    compare(nn.Conv1d(4, 6, 3, **kwargs), torch.nn.Conv1d(4, 6, 3, **kwargs), rand(2, 4, 9))


@needs_torch
@pytest.mark.parametrize("kwargs", [
    dict(stride=2, padding=1),
    dict(padding="same", groups=2),
    dict(stride=(1, 2), padding=(0, 1), dilation=(2, 1), bias=False),
    dict(padding=1, padding_mode="replicate"),
])
def test_conv2d(kwargs):
    compare(nn.Conv2d(4, 6, 3, **kwargs), torch.nn.Conv2d(4, 6, 3, **kwargs), rand(2, 4, 7, 6))


@needs_torch
@pytest.mark.parametrize("make", [
    lambda m: m.MaxPool1d(3, 2, 1),
    lambda m: m.MaxPool1d(2, ceil_mode=True),
    lambda m: m.MaxPool2d(2),
    lambda m: m.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
    lambda m: m.AvgPool2d(2),
    lambda m: m.AvgPool2d(3, 2, 1, count_include_pad=False),
    lambda m: m.AdaptiveAvgPool2d((3, 2)),
    lambda m: m.AdaptiveAvgPool2d(1),
])
def test_pooling(make):
    fmod = make(nn)
    x = rand(2, 3, 7) if "1d" in type(fmod).__name__ else rand(2, 3, 7, 6)
    compare(fmod, make(torch.nn), x)


@needs_torch
def test_max_pool_return_indices():
    outs = compare(nn.MaxPool2d(2, return_indices=True),
                   torch.nn.MaxPool2d(2, return_indices=True), rand(1, 2, 4, 4))
    assert outs[1].dtype == flow.int64


# -- normalisation, embedding -------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("kwargs", [dict(), dict(momentum=None), dict(affine=False),
                                    dict(track_running_stats=False), dict(bias=False)])
def test_batchnorm1d_train_then_eval(kwargs):
    fmod, tmod = nn.BatchNorm1d(4, **kwargs), torch.nn.BatchNorm1d(4, **kwargs)
    compare(fmod, tmod, rand(8, 4), train=True)
    compare(fmod, tmod, rand(8, 4, 5, seed=1), train=True)  # buffers carried over
    compare(fmod, tmod, rand(3, 4, 5, seed=2), train=False)
    if fmod.track_running_stats:
        assert fmod.num_batches_tracked.item() == 2


@needs_torch
def test_batchnorm2d():
    fmod, tmod = nn.BatchNorm2d(3, momentum=0.3), torch.nn.BatchNorm2d(3, momentum=0.3)
    compare(fmod, tmod, rand(4, 3, 5, 5), train=True)
    compare(fmod, tmod, rand(2, 3, 5, 5, seed=3), train=False)
    with pytest.raises(ValueError, match="expected 4D input"):
        fmod(flow.ones(2, 3))


@needs_torch
@pytest.mark.parametrize("args,kwargs", [((5,), {}), (((4, 5),), {}),
                                         ((5,), dict(elementwise_affine=False)),
                                         ((5,), dict(bias=False, eps=1e-3))])
def test_layernorm(args, kwargs):
    compare(nn.LayerNorm(*args, **kwargs), torch.nn.LayerNorm(*args, **kwargs), rand(3, 4, 5))


@needs_torch
@pytest.mark.parametrize("kwargs", [dict(), dict(affine=False)])
def test_groupnorm(kwargs):
    compare(nn.GroupNorm(2, 6, **kwargs), torch.nn.GroupNorm(2, 6, **kwargs), rand(3, 6, 4))


@needs_torch
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding(padding_idx):
    fmod = nn.Embedding(10, 4, padding_idx=padding_idx)
    ids = np.array([[0, 3, 3], [9, 0, 1]], dtype=np.int64)
    compare(fmod, torch.nn.Embedding(10, 4, padding_idx=padding_idx), ids)
    if padding_idx is not None:
        assert np.all(fmod.weight.grad.numpy()[padding_idx] == 0)


def test_embedding_from_pretrained():
    table = flow.tensor(np.arange(6.0).reshape(3, 2))
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad
    np.testing.assert_array_equal(emb(flow.tensor([2, 0])).numpy(), [[4, 5], [0, 1]])


# -- activations, dropout, reshaping ------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("make", [
    lambda m: m.ReLU(), lambda m: m.GELU(), lambda m: m.GELU(approximate="tanh"),
    lambda m: m.SiLU(), lambda m: m.Sigmoid(), lambda m: m.Tanh(), lambda m: m.Softmax(dim=1),
    lambda m: m.LogSoftmax(dim=-1), lambda m: m.LeakyReLU(0.2), lambda m: m.ELU(0.7),
    lambda m: m.Softplus(2.0, 5.0), lambda m: m.Identity(), lambda m: m.Flatten(),
    lambda m: m.Flatten(0, 1), lambda m: m.Unflatten(2, (2, 2)),
])
def test_activation_and_shape_layers(make):
    compare(make(nn), make(torch.nn), rand(3, 5, 4))


@needs_torch
def test_inplace_relu_on_non_leaf():
    x = flow.tensor(rand(4, 3), requires_grad=True)
    y = x * 1.0
    out = nn.ReLU(inplace=True)(y)
    assert out is y
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (x.detach().numpy() > 0).astype(float))


def test_dropout_train_and_eval():
    flow.manual_seed(0)
    drop = nn.Dropout(0.25)
    x = flow.ones(200, 100)
    y = drop(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    drop.eval()
    assert np.array_equal(drop(x).numpy(), x.numpy())
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


# -- losses -------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("make,kind", [
    (lambda m, w: m.CrossEntropyLoss(), "index"),
    (lambda m, w: m.CrossEntropyLoss(weight=w, ignore_index=2, reduction="sum"), "index"),
    (lambda m, w: m.CrossEntropyLoss(label_smoothing=0.1), "index"),
    (lambda m, w: m.CrossEntropyLoss(reduction="none"), "probs"),
    (lambda m, w: m.NLLLoss(weight=w), "index"),
    (lambda m, w: m.MSELoss(), "real"),
    (lambda m, w: m.L1Loss(reduction="sum"), "real"),
    (lambda m, w: m.SmoothL1Loss(beta=0.5), "real"),
    (lambda m, w: m.KLDivLoss(reduction="batchmean"), "probs"),
    (lambda m, w: m.KLDivLoss(reduction="sum", log_target=True), "logprobs"),
    (lambda m, w: m.BCELoss(), "unit"),
    (lambda m, w: m.BCEWithLogitsLoss(pos_weight=w), "unit"),
])
def test_losses(make, kind):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5))
    w = rng.uniform(0.5, 2.0, 5)
    fmod, tmod = make(nn, flow.tensor(w)), make(torch.nn, torch.tensor(w))
    if kind == "index":
        target = rng.integers(0, 5, 6)
    elif kind == "probs":
        target = rng.dirichlet(np.ones(5), 6)
    elif kind == "logprobs":
        target = np.log(rng.dirichlet(np.ones(5), 6))
    elif kind == "unit":
        target = rng.uniform(0, 1, (6, 5))
    else:
        target = rng.standard_normal((6, 5))
    if isinstance(fmod, nn.BCELoss):
        x = 1 / (1 + np.exp(-x))
    if isinstance(fmod, (nn.NLLLoss, nn.KLDivLoss)):
        x = x - np.log(np.exp(x).sum(1, keepdims=True))
    ft = flow.tensor(target)
    tt = torch.tensor(target)
    # the target is not differentiated; a leaf without grad goes through unchanged
    fx, tx = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fl, tl = fmod(fx, ft), tmod(tx, tt)
    np.testing.assert_allclose(fl.detach().numpy(), tl.detach().numpy(), rtol=1e-7, atol=1e-9)
    fl.sum().backward()
    tl.sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_loss_options_are_checked_and_weight_is_a_buffer():
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    ce = nn.CrossEntropyLoss(weight=flow.ones(3))
    assert "weight" in dict(ce.named_buffers())


# -- attention ----------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_self(batch_first):
    x = rand(2, 5, 8) if batch_first else rand(5, 2, 8)
    compare(nn.MultiheadAttention(8, 2, batch_first=batch_first),
            torch.nn.MultiheadAttention(8, 2, batch_first=batch_first), x, x, x)


@needs_torch
def test_multihead_attention_masks_and_weights():
    q, k = rand(4, 2, 8), rand(6, 2, 8, seed=1)
    attn_mask = np.triu(np.ones((4, 6), dtype=bool), 3)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 4:] = True
    fmod, tmod = nn.MultiheadAttention(8, 4), torch.nn.MultiheadAttention(8, 4)
    for average in (True, False):
        compare(fmod, tmod, q, k, k, flow.tensor(kpm), True, flow.tensor(attn_mask), average)
        fo, fw = fmod(flow.tensor(q), flow.tensor(k), flow.tensor(k),
                      key_padding_mask=flow.tensor(kpm), attn_mask=flow.tensor(attn_mask),
                      average_attn_weights=average)
        to, tw = tmod(torch.tensor(q), torch.tensor(k), torch.tensor(k),
                      key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(attn_mask),
                      average_attn_weights=average)
        np.testing.assert_allclose(fw.detach().numpy(), tw.detach().numpy(), atol=1e-12)
    float_mask = rand(4, 6, seed=5)
    out = fmod(flow.tensor(q), flow.tensor(k), flow.tensor(k), need_weights=False,
               attn_mask=flow.tensor(float_mask))
    ref = tmod(torch.tensor(q), torch.tensor(k), torch.tensor(k), need_weights=False,
               attn_mask=torch.tensor(float_mask))
    assert out[1] is None and ref[1] is None
    np.testing.assert_allclose(out[0].detach().numpy(), ref[0].detach().numpy(), atol=1e-10)


@needs_torch
def test_multihead_attention_variants():
    q, k, v = rand(3, 2, 8), rand(5, 2, 6, seed=1), rand(5, 2, 4, seed=2)
    compare(nn.MultiheadAttention(8, 2, kdim=6, vdim=4),
            torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=4), q, k, v)
    x = rand(3, 2, 8)
    compare(nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True, bias=False),
            torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True,
                                        bias=False), x, x, x)
    u = rand(3, 8)  # unbatched
    compare(nn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2), u, u, u)


@needs_torch
def test_multihead_attention_is_causal():
    x = rand(5, 2, 8)
    fmod, tmod = nn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2)
    compare(fmod, tmod, x, x, x, backward=False)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    out = fmod(flow.tensor(x), flow.tensor(x), flow.tensor(x), is_causal=True)[0]
    ref = tmod(torch.tensor(x), torch.tensor(x), torch.tensor(x), attn_mask=mask,
               is_causal=True)[0]
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-10)


def test_multihead_attention_shape_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    mha = nn.MultiheadAttention(8, 2)
    x = flow.ones(3, 2, 8)
    with pytest.raises(ValueError, match="attn_mask should have shape"):
        mha(x, x, x, attn_mask=flow.zeros(2, 2))


@needs_torch
@pytest.mark.parametrize("kwargs", [dict(), dict(norm_first=True, activation="gelu"),
                                    dict(batch_first=True, bias=False)])
def test_transformer_encoder_layer(kwargs):
    fmod = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kwargs)
    tmod = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kwargs)
    assert list(fmod.state_dict()) == list(tmod.state_dict())
    compare(fmod, tmod, rand(5, 3, 8))


@needs_torch
def test_transformer_encoder_layer_with_masks():
    fmod = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    tmod = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    kpm = np.zeros((3, 5), dtype=bool)
    kpm[0, 3:] = True
    compare(fmod, tmod, rand(5, 3, 8), flow.tensor(mask), flow.tensor(kpm))


@needs_torch
def test_transformer_encoder():
    flayer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    tlayer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    fmod = nn.TransformerEncoder(flayer, 2, norm=nn.LayerNorm(8))
    tmod = torch.nn.TransformerEncoder(tlayer, 2, norm=torch.nn.LayerNorm(8),
                                       enable_nested_tensor=False)
    compare(fmod, tmod, rand(3, 5, 8))


def test_error_inside_nested_module_names_path():
    model = nn.Sequential(OrderedDict(
        embed=nn.Linear(4, 8),
        blocks=nn.ModuleList([nn.Sequential(nn.Linear(8, 8)), nn.Sequential(nn.Linear(6, 8))])))

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            x = self.model.embed(x)
            for block in self.model.blocks:
                x = block(x)
            return x

    with pytest.raises(Exception, match=r"in module Wrapper\.model\.blocks\.1\.0\]"):
        Wrapper()(flow.ones(2, 4))


# -- containers ---------------------------------------------------------------------------------

def test_sequential():
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    seq = nn.Sequential(a, b)
    assert len(seq) == 2 and seq[0] is a and seq[-1] is b and list(seq) == [a, b]
    sub = seq[1:]
    assert type(sub) is nn.Sequential and list(sub) == [b]
    seq.append(c)
    assert list(seq._modules) == ["0", "1", "2"]
    seq.insert(0, nn.Identity())
    assert isinstance(seq[0], nn.Identity) and seq[3] is c
    del seq[0]
    assert list(seq._modules) == ["0", "1", "2"] and seq[0] is a
    seq[1] = nn.ELU()
    assert isinstance(seq[1], nn.ELU)
    x = flow.tensor([-1.0, 2.0])
    np.testing.assert_allclose(seq(x).numpy(),
                               1 / (1 + np.exp(-np.array([0.0, 2.0]))), rtol=1e-6)
    named = nn.Sequential(OrderedDict(first=nn.ReLU(), second=nn.Tanh()))
    assert list(named._modules) == ["first", "second"] and isinstance(named[1], nn.Tanh)
    with pytest.raises(IndexError):
        seq[5]


def test_module_list():
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    layers.append(nn.Sigmoid())
    layers.extend([nn.ELU()])
    layers.insert(1, nn.Identity())
    assert [type(m).__name__ for m in layers] == ["ReLU", "Identity", "Tanh", "Sigmoid", "ELU"]
    assert type(layers[1:3]) is nn.ModuleList and len(layers[1:3]) == 2
    assert isinstance(layers[-1], nn.ELU)
    del layers[0]
    assert list(layers._modules) == ["0", "1", "2", "3"]
    layers += [nn.ReLU()]
    assert len(layers) == 5 and isinstance(layers.pop(), nn.ReLU) and len(layers) == 4
    with pytest.raises(TypeError, match="iterable"):
        layers.extend(nn.ReLU())
    with pytest.raises(IndexError):
        layers[10]


def test_module_dict():
    d = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Tanh()})
    d["c"] = nn.Sigmoid()
    d.update([("e", nn.ELU())])
    assert list(d) == ["a", "b", "c", "e"] and "c" in d and len(d) == 4
    assert isinstance(d.pop("b"), nn.Tanh) and list(d.keys()) == ["a", "c", "e"]
    assert [type(v).__name__ for v in d.values()] == ["ReLU", "Sigmoid", "ELU"]


def test_parameter_list_and_dict():
    pl = nn.ParameterList([nn.Parameter(flow.ones(2)), flow.zeros(3)])
    pl.append(nn.Parameter(flow.ones(1)))
    assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pd = nn.ParameterDict({"w": nn.Parameter(flow.ones(2, 2))})
    pd["b"] = flow.zeros(2)
    assert list(pd) == ["w", "b"] and isinstance(pd["b"], nn.Parameter)
    assert list(nn.ParameterDict({"z": flow.ones(1), "a": flow.ones(1)})) == ["a", "z"]
    holder = nn.Module()
    holder.pl, holder.pd = pl, pd
    assert [n for n, _ in holder.named_parameters()] == ["pl.0", "pl.1", "pl.2", "pd.w", "pd.b"]
    if torch is not None:
        tpl = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2)), torch.zeros(3)])
        assert repr(nn.ParameterList([nn.Parameter(flow.ones(2)), flow.zeros(3)])) \
            .replace("actorflow", "torch") == repr(tpl)
        tpd = torch.nn.ParameterDict({"w": torch.nn.Parameter(torch.ones(2, 2)),
                                      "b": torch.zeros(2)})
        fpd = nn.ParameterDict({"w": nn.Parameter(flow.ones(2, 2)), "b": flow.zeros(2)})
        assert repr(fpd).replace("actorflow", "torch") == repr(tpd)


def test_batchnorm_cumulative_average_in_graph_matches_eager_and_torch():
    # momentum=None: running stats average every batch seen; the factor 1/n is a tensor op,
    # so the module also traces into an nn.Graph (it used to read num_batches_tracked.item())
    nn = flow.nn
    m, ref = nn.BatchNorm2d(3, momentum=None), nn.BatchNorm2d(3, momentum=None)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m

        def build(self, x):
            return self.m(x)

    g = G()
    xs = [np.random.default_rng(s).standard_normal((4, 3, 2, 2)).astype(np.float32) * 2 + s
          for s in range(3)]
    for x in xs:
        np.testing.assert_allclose(g(flow.tensor(x)).numpy(), ref(flow.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    means = [x.mean(axis=(0, 2, 3)) for x in xs]
    vars_ = [x.var(axis=(0, 2, 3), ddof=1) for x in xs]
    for mod in (m, ref):
        assert int(mod.num_batches_tracked.item()) == 3
        # batch 1 gets weight 1/1, so the initial (0, 1) stats drop out: a plain average
        np.testing.assert_allclose(mod.running_mean.numpy(), np.mean(means, axis=0), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(mod.running_var.numpy(), np.mean(vars_, axis=0), rtol=1e-5)
