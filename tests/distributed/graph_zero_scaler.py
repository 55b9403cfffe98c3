"""Run under ``mpiexec -n 2``: ZeRO (stages 1, 2 and 3) in a float16-AMP graph with a
GradScaler trains as the same graph without ZeRO: the same losses, parameters and loss
scale, including the steps the scaler skips (a huge initial scale overflows the first
gradients: those steps update nothing, ZeRO's write-back of the gathered shard included).
Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.nn.graph.optimizer_emission import GradScalerState

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(5)
N, D, H, C = 8, 16, 32, 4
X = rng.standard_normal((N, D)).astype(np.float32)
Y = rng.integers(0, C, size=N)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, stage):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.enable_amp(True)
        self.set_grad_scaler(GradScalerState(init_scale=2.0 ** 30, growth_interval=2))
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def run(stage):
    flow.manual_seed(3)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)).to_global(placement=PL, sbp=B)
    opt = flow.optim.Adam(m.parameters(), lr=0.01)
    g = TrainGraph(m, opt, stage)
    x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    losses = [float(g(x, y).numpy()) for _ in range(8)]
    scale = float(g.state_dict()["_grad_scaler"]["scale"])
    return losses, [p.numpy() for p in m.parameters()], scale


ref_l, ref_p, ref_s = run(0)
assert ref_s < 2.0 ** 30, ref_s  # some steps overflowed and were skipped
for stage in (1, 2, 3):
    ls, ps, s = run(stage)
    np.testing.assert_allclose(ls, ref_l, rtol=1e-3, err_msg=f"rank {r}: stage {stage} losses")
    assert s == ref_s, (stage, s, ref_s)
    for k, (a, b) in enumerate(zip(ps, ref_p)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4,
                                   err_msg=f"rank {r}: stage {stage} parameter {k}")
print(f"OK rank {r}", flush=True)
