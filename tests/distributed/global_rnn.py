"""Run under ``mpiexec -n 2``: RNN, GRU and LSTM (and their cells) on global inputs without
an initial state make it global zeros on the input's placement (split along the batch where
the input is), as OneFlow does; outputs and gradients agree with PyTorch. Prints
``OK rank R``."""
import numpy as np
import torch

import actorflow as flow

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
S0, S1, B = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast
rng = np.random.default_rng(0)


def same_weights(m, tm):
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return m.to_global(PL, B)


def check(name, m, tm, x, sbp, split_out):
    gx = flow.tensor(x, placement=PL, sbp=sbp, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    out, tout = m(gx), tm(tx)
    if isinstance(out, tuple):  # (output, state) of RNNs, (h, c) of the LSTM cell
        out, tout = out[0], tout[0]
    assert split_out is None or out.sbp == (split_out,), (name, out.sbp)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6,
                               err_msg=name)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg=name)


X = rng.random((5, 4, 3)).astype(np.float32)  # (L, N, H_in)
for cls in ("RNN", "GRU", "LSTM"):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(3, 2, num_layers=2)
    m = same_weights(getattr(flow.nn, cls)(3, 2, num_layers=2), tm)
    check(cls + " batch split", m, tm, X, S1, S1)
    check(cls + " time split", m, tm, X, S0, None)
for cls in ("RNNCell", "GRUCell", "LSTMCell"):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(3, 2)
    m = same_weights(getattr(flow.nn, cls)(3, 2), tm)
    check(cls, m, tm, X[0], S0, S0)
print(f"OK rank {r}", flush=True)
