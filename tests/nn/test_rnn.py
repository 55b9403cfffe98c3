"""RNN, LSTM, GRU and their cells vs PyTorch (float64, PyTorch's weights loaded through
state_dict): outputs, final states, and gradients of input, initial states and parameters."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.utils.prune as prune
from tests.helpers import torch

pytestmark = pytest.mark.skipif(torch is None, reason="needs PyTorch")


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for item in x for y in _flat(item)]
    return [x]


def _compare(fmod, tmod, x: np.ndarray, hx=None, atol: float = 1e-10):
    """Run both on ``x`` (and initial state ``hx``: an array or a tuple of arrays); compare
    every output and the gradients of a random weighted sum of them."""
    tmod = tmod.double()
    tmod.zero_grad(set_to_none=True)
    fmod = fmod.double()
    fmod.load_state_dict({k: v.detach().numpy() for k, v in tmod.state_dict().items()})
    f_x = flow.tensor(x, requires_grad=True)
    t_x = torch.tensor(x, requires_grad=True)
    f_args, t_args = [f_x], [t_x]
    f_h, t_h = [], []
    if hx is not None:
        for a in _flat(hx):
            f_h.append(flow.tensor(a, requires_grad=True))
            t_h.append(torch.tensor(a, requires_grad=True))
        f_args.append(tuple(f_h) if isinstance(hx, tuple) else f_h[0])
        t_args.append(tuple(t_h) if isinstance(hx, tuple) else t_h[0])
    f_outs, t_outs = _flat(fmod(*f_args)), _flat(tmod(*t_args))
    assert len(f_outs) == len(t_outs)
    rng = np.random.default_rng(0)
    f_loss = t_loss = 0
    for fo, to in zip(f_outs, t_outs):
        assert tuple(fo.shape) == tuple(to.shape)
        np.testing.assert_allclose(fo.detach().numpy(), to.detach().numpy(), atol=atol)
        g = rng.standard_normal(tuple(to.shape))
        f_loss = f_loss + (fo * flow.tensor(g)).sum()
        t_loss = t_loss + (to * torch.tensor(g)).sum()
    f_loss.backward()
    t_loss.backward()
    for i, (fi, ti) in enumerate(zip([f_x] + f_h, [t_x] + t_h)):
        np.testing.assert_allclose(fi.grad.numpy(), ti.grad.numpy(), atol=atol * 10,
                                   err_msg=f"grad of input {i}")
    t_params = dict(tmod.named_parameters())
    names = [n for n, _ in fmod.named_parameters()]
    assert names == list(t_params)
    for name, fp in fmod.named_parameters():
        np.testing.assert_allclose(fp.grad.numpy(), t_params[name].grad.numpy(),
                                   atol=atol * 10, err_msg=name)


def _rand(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


CONFIGS = [
    {},
    {"num_layers": 2},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"bias": False},
]


@pytest.mark.parametrize("kw", CONFIGS)
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_match_pytorch(kind, kw):
    torch.manual_seed(0)
    tmod = getattr(torch.nn, kind)(3, 4, **kw)
    fmod = getattr(nn, kind)(3, 4, **kw)
    x = _rand(2, 5, 3) if kw.get("batch_first") else _rand(5, 2, 3)
    _compare(fmod, tmod, x)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_given_state_and_unbatched(kind):
    layers = 2 * 2
    h = _rand(layers, 3, 4, seed=2)
    hx = (h, _rand(layers, 3, 4, seed=3)) if kind == "LSTM" else h
    torch.manual_seed(1)
    tmod = getattr(torch.nn, kind)(2, 4, num_layers=2, bidirectional=True)
    _compare(getattr(nn, kind)(2, 4, num_layers=2, bidirectional=True), tmod, _rand(6, 3, 2), hx)
    # unbatched: (L, H_in) input, (layers, H) states
    hx1 = (h[:, 0], hx[1][:, 0]) if kind == "LSTM" else h[:, 0]
    _compare(getattr(nn, kind)(2, 4, num_layers=2, bidirectional=True), tmod, _rand(6, 2), hx1)


def test_rnn_relu_and_lstm_projection():
    torch.manual_seed(2)
    _compare(nn.RNN(3, 5, nonlinearity="relu", num_layers=2),
             torch.nn.RNN(3, 5, nonlinearity="relu", num_layers=2), _rand(4, 2, 3))
    kw = {"proj_size": 2, "num_layers": 2, "bidirectional": True}
    _compare(nn.LSTM(3, 5, **kw), torch.nn.LSTM(3, 5, **kw), _rand(4, 2, 3))


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_pytorch(kind, bias):
    torch.manual_seed(3)
    tmod = getattr(torch.nn, kind)(3, 4, bias=bias)
    _compare(getattr(nn, kind)(3, 4, bias=bias), tmod, _rand(2, 3))
    h = _rand(2, 4, seed=5)
    hx = (h, _rand(2, 4, seed=6)) if kind == "LSTMCell" else h
    _compare(getattr(nn, kind)(3, 4, bias=bias), tmod, _rand(2, 3), hx)
    hx1 = (h[0], hx[1][0]) if kind == "LSTMCell" else h[0]
    _compare(getattr(nn, kind)(3, 4, bias=bias), tmod, _rand(3), hx1)


def test_parameters_init_and_flat_weights_follow_pruning():
    m = nn.LSTM(32, 32)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    t = torch.nn.LSTM(32, 32)
    assert shapes == {n: tuple(p.shape) for n, p in t.named_parameters()}
    bound = 1 / np.sqrt(32)
    assert all(np.abs(p.numpy()).max() <= bound for p in m.parameters())
    prune.l1_unstructured(m, "weight_ih_l0", 0.5)
    assert sum(isinstance(p, nn.Parameter) for p in m._flat_weights) == 3
    prune.remove(m, "weight_ih_l0")
    assert sum(isinstance(p, nn.Parameter) for p in m._flat_weights) == 4
    assert "weight_ih_l0" in dict(m.named_parameters())


def test_dropout_between_layers_only_in_training():
    m = nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = flow.tensor(_rand(5, 2, 3), dtype=flow.float32)
    m.eval()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    outs = [m(x)[0].numpy() for _ in range(4)]
    assert any(not np.array_equal(o, a) for o in outs)


def test_errors_name_the_module_and_shapes():
    with pytest.raises(ValueError, match=r"LSTM: expected input of shape \(L, N, 3\)"):
        nn.LSTM(3, 4)(flow.zeros(5, 2, 7))
    with pytest.raises(ValueError, match=r"GRU: expected h_0 of shape \(1, 2, 4\)"):
        nn.GRU(3, 4)(flow.zeros(5, 2, 3), flow.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match=r"LSTMCell: expected a hidden state of shape \(2, 4\)"):
        nn.LSTMCell(3, 4)(flow.zeros(2, 3), (flow.zeros(2, 5), flow.zeros(2, 4)))


def test_lstm_traces_into_a_graph():
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m

        def build(self, x):
            return self.m(x)

    x = flow.tensor(_rand(5, 2, 3), dtype=flow.float32)
    for got, want in zip(_flat(G()(x)), _flat(m(x))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
