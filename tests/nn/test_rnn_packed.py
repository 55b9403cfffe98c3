"""nn.utils.rnn (PackedSequence and its functions) and RNN/LSTM/GRU over packed inputs vs
PyTorch (float64): packed data, batch sizes, permutations, padded outputs, final states and
the gradients of inputs, initial states and parameters."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.nn.utils import rnn
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(torch is None, reason="needs PyTorch"),
              pytest.mark.timeout(120)]


def _np(t):
    return t.detach().numpy()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_pad_roundtrip_matches_torch(batch_first, enforce_sorted):
    rng = np.random.default_rng(0)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    shape = (4, 5, 2) if batch_first else (5, 4, 2)
    x = rng.standard_normal(shape)
    fx, tx = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fp = rnn.pack_padded_sequence(fx, lengths, batch_first, enforce_sorted)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    np.testing.assert_array_equal(_np(fp.data), _np(tp.data))
    np.testing.assert_array_equal(fp.batch_sizes.numpy(), tp.batch_sizes.numpy())
    if enforce_sorted:
        assert fp.sorted_indices is None and fp.unsorted_indices is None
    else:
        np.testing.assert_array_equal(fp.sorted_indices.numpy(), tp.sorted_indices.numpy())
        np.testing.assert_array_equal(fp.unsorted_indices.numpy(), tp.unsorted_indices.numpy())
    fo, fl = rnn.pad_packed_sequence(fp, batch_first, padding_value=-7.0, total_length=6)
    to, tl = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first, padding_value=-7.0,
                                                    total_length=6)
    np.testing.assert_array_equal(_np(fo), _np(to))
    np.testing.assert_array_equal(fl.numpy(), tl.numpy())
    g = rng.standard_normal(tuple(to.shape))
    (fo * flow.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(fx.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_and_pack_sequence(batch_first, side):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((n, 3)) for n in (2, 4, 1)]
    fs = [flow.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fo = rnn.pad_sequence(fs, batch_first, 1.5, side)
    to = torch.nn.utils.rnn.pad_sequence(ts, batch_first, 1.5, side)
    np.testing.assert_array_equal(_np(fo), _np(to))
    g = rng.standard_normal(tuple(to.shape))
    (fo * flow.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    for f, t in zip(fs, ts):
        np.testing.assert_array_equal(f.grad.numpy(), t.grad.numpy())
    fp = rnn.pack_sequence(fs, enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_sequence(ts, enforce_sorted=False)
    np.testing.assert_array_equal(_np(fp.data), _np(tp.data))
    back = rnn.unpack_sequence(fp)
    for b, a in zip(back, arrays):
        np.testing.assert_array_equal(_np(b), a)


def test_errors_name_the_function():
    x = flow.zeros(4, 2, 3)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn.pack_padded_sequence(x, [1, 2])
    with pytest.raises(RuntimeError, match="greater than 0"):
        rnn.pack_padded_sequence(x, [2, 0])
    with pytest.raises(ValueError, match="expected 2 lengths"):
        rnn.pack_padded_sequence(x, [2, 1, 1])
    with pytest.raises(RuntimeError, match="exceeds"):
        rnn.pack_padded_sequence(x, [5, 1])
    p = rnn.pack_padded_sequence(x, [3, 1])
    with pytest.raises(ValueError, match="total_length"):
        rnn.pad_packed_sequence(p, total_length=2)
    with pytest.raises(RuntimeError, match="sequence 1"):
        rnn.pad_sequence([flow.zeros(2, 3), flow.zeros(2, 4)])


def test_packed_sequence_methods():
    p = rnn.pack_sequence([flow.zeros(3, 2), flow.zeros(1, 2)])
    assert isinstance(p, tuple) and len(p) == 4
    assert p.double().data.dtype is flow.float64
    assert p.to(flow.float16).data.dtype is flow.float16
    assert p.batch_sizes.dtype is flow.int64 and not p.is_cuda and not p.is_pinned()


def _make(kind, tmod_kwargs):
    tcls = {"RNN": torch.nn.RNN, "LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}[kind]
    fcls = {"RNN": nn.RNN, "LSTM": nn.LSTM, "GRU": nn.GRU}[kind]
    torch.manual_seed(0)
    tmod = tcls(**tmod_kwargs).double()
    fmod = fcls(**tmod_kwargs).double()
    fmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    return fmod, tmod


CASES = [
    ("RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu"), False, True),
    ("LSTM", dict(num_layers=2, bidirectional=True), True, False),
    ("LSTM", dict(proj_size=2, bidirectional=True), False, True),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True), True, False),
    ("GRU", dict(), True, True),
]


@pytest.mark.parametrize("kind,extra,with_hx,enforce_sorted", CASES)
def test_rnn_layers_on_packed_sequences_match_torch(kind, extra, with_hx, enforce_sorted):
    kwargs = dict(input_size=3, hidden_size=4, **extra)
    fmod, tmod = _make(kind, kwargs)
    rng = np.random.default_rng(2)
    lengths = [4, 3, 3, 1] if enforce_sorted else [3, 4, 1, 3]
    batch_first = extra.get("batch_first", False)
    x = rng.standard_normal((4, 4, 3))
    fx, tx = flow.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    fp = rnn.pack_padded_sequence(fx, lengths, batch_first, enforce_sorted)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted)
    dirs = 2 if extra.get("bidirectional") else 1
    layers = extra.get("num_layers", 1)
    f_h, t_h = [], []
    if with_hx:
        sizes = [extra.get("proj_size") or 4] + ([4] if kind == "LSTM" else [])
        for size in sizes:
            a = rng.standard_normal((layers * dirs, 4, size))
            f_h.append(flow.tensor(a, requires_grad=True))
            t_h.append(torch.tensor(a, requires_grad=True))
    f_arg = (tuple(f_h) if kind == "LSTM" else f_h[0]) if with_hx else None
    t_arg = (tuple(t_h) if kind == "LSTM" else t_h[0]) if with_hx else None
    f_out, f_state = fmod(fp, f_arg)
    t_out, t_state = tmod(tp, t_arg)
    assert isinstance(f_out, rnn.PackedSequence)
    np.testing.assert_array_equal(f_out.batch_sizes.numpy(), t_out.batch_sizes.numpy())
    f_pad, _ = rnn.pad_packed_sequence(f_out, batch_first)
    t_pad, _ = torch.nn.utils.rnn.pad_packed_sequence(t_out, batch_first)
    f_all = [f_pad] + (list(f_state) if kind == "LSTM" else [f_state])
    t_all = [t_pad] + (list(t_state) if kind == "LSTM" else [t_state])
    f_loss = t_loss = 0
    for fo, to in zip(f_all, t_all):
        assert tuple(fo.shape) == tuple(to.shape)
        np.testing.assert_allclose(_np(fo), _np(to), atol=1e-12)
        g = rng.standard_normal(tuple(to.shape))
        f_loss = f_loss + (fo * flow.tensor(g)).sum()
        t_loss = t_loss + (to * torch.tensor(g)).sum()
    f_loss.backward()
    t_loss.backward()
    for fi, ti in zip([fx] + f_h, [tx] + t_h):
        np.testing.assert_allclose(fi.grad.numpy(), ti.grad.numpy(), atol=1e-11)
    t_params = dict(tmod.named_parameters())
    for name, p in fmod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_params[name].grad.numpy(), atol=1e-11,
                                   err_msg=name)
