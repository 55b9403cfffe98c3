"""Run under ``mpiexec -n 2``: ``flow.gather``'s gradient on global tensors (global zeros for
the scatter, against the local computation), and ``nn.CoinFlip`` with a placement: a batch of
``batch_size`` logical values, the same on every rank, inside and outside nn.Graph. Prints
``OK rank R``."""
import numpy as np

import actorflow as flow

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
rng = np.random.default_rng(4)
X = rng.standard_normal((6, 4))
IDX = rng.integers(0, 4, size=(6, 3))
x_loc = flow.tensor(X, requires_grad=True)
flow.gather(x_loc, 1, flow.tensor(IDX)).square().sum().backward()
for sbp in (B, S0):
    x = flow.tensor(X, placement=PL, sbp=sbp, requires_grad=True)
    out = flow.gather(x, 1, flow.tensor(IDX, placement=PL, sbp=sbp))
    out.square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x_loc.grad.numpy(), err_msg=f"rank {r}: {sbp}")

for sbp in (B, S0):
    flip = flow.nn.CoinFlip(batch_size=8, random_seed=3, probability=0.5, placement=PL, sbp=sbp)
    v = flip()
    assert v.shape == (8,) and v.sbp == (sbp,) and v.dtype == flow.int8, (v.shape, v.sbp)
    full = v.numpy()
    seen = flow.tensor(full[None]).to_global(placement=PL, sbp=S0).numpy()
    assert (seen == full).all() and set(np.unique(full)) <= {0, 1}, seen

    class G(flow.nn.Graph):
        def __init__(self, sbp):
            super().__init__()
            self.flip = flow.nn.CoinFlip(batch_size=8, probability=1.0, placement=PL, sbp=sbp)

        def build(self):
            return self.flip()
    g = G(sbp)()
    assert g.shape == (8,) and (g.numpy() == 1).all(), g
print(f"OK rank {r}", flush=True)
