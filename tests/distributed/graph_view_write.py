"""Run under ``mpiexec -n N``: writes through views in a data-parallel nn.Graph. The hidden
activation (split(0) across ranks) is written through a column view (keeps the split) and a
row view (not a view of the shards: the write reaches the tensor through its write-back); the
distributed graph trains to the losses, outputs and parameters of the same graph in one
process. argv[1]: "vm" for the reference executor. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(5)
N, D, H = 4 * n, 5, 6
X = rng.standard_normal((N, D))
T = rng.standard_normal((N, 2))
STEPS = 3


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, H), nn.Linear(H, 2)

    def forward(self, x):
        h = self.fc1(x)
        h[:, 1:4].mul_(3.0)            # columns: the view keeps split(0)
        h.narrow(0, 1, 2).relu_()      # rows 1, 2 of the whole batch
        return self.fc2(h), h


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, t):
        out, h = self.model(x)
        loss = ((out - t) ** 2).sum()
        loss.backward()
        return loss, h


def run(glob: bool):
    flow.manual_seed(3)
    m = M().to(flow.float64)
    if glob:
        m.to_global(placement=PL, sbp=B)
    opt = flow.optim.SGD(m.parameters(), lr=0.05)
    x, t = flow.tensor(X), flow.tensor(T)
    if glob:
        x, t = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(T, placement=PL, sbp=S0)
    g = TrainGraph(m, opt)
    losses, hs = [], []
    for _ in range(STEPS):
        loss, h = g(x, t)
        losses.append(float(loss.numpy()))
        hs.append(h.numpy())
    return [p.numpy() for p in m.parameters()], losses, hs


params_1, losses_1, hs_1 = run(False)
params_n, losses_n, hs_n = run(True)
np.testing.assert_allclose(losses_n, losses_1, rtol=1e-10)
for a, b in zip(hs_n, hs_1):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
for a, b in zip(params_n, params_1):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
flow.manual_seed(3)
with flow.no_grad():  # eager views share memory: the first step's h, eagerly
    h_eager = M().to(flow.float64)(flow.tensor(X))[1].numpy()
np.testing.assert_allclose(hs_1[0], h_eager, rtol=1e-12)
print(f"OK rank {r}", flush=True)
