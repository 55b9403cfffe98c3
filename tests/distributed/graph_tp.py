"""Run under ``mpiexec -n N``: a Megatron-style tensor-parallel MLP in an nn.Graph - the first
linear's weight split by output features (split(0) of its (out, in) weight), the second's by
input features (split(1)), the output's partial sums made broadcast with ``to_global`` in
build - equals the unsplit model: outputs, and gradients (two SGD steps of lr 1 give
parameter - gradient), on both graph executors (argv[1]: "vm" for the reference executor).
Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B = flow.sbp.broadcast
rng = np.random.default_rng(3)
N, D, H, C = 5, 6, 4 * n + 1, 3   # hidden features split unevenly
X = rng.standard_normal((N, D))
T = rng.standard_normal((N, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, H)
        self.fc2 = nn.Linear(H, C)

    def forward(self, x):
        return self.fc2(flow.relu(self.fc1(x)))


def make(tp: bool) -> MLP:
    flow.manual_seed(9)
    m = MLP().to(flow.float64)
    if tp:  # the same values, laid out over the ranks
        m.to_global(placement=PL, sbp=B)
        for mod, name, sbp in ((m.fc1, "weight", flow.sbp.split(0)),
                               (m.fc1, "bias", flow.sbp.split(0)),
                               (m.fc2, "weight", flow.sbp.split(1))):
            p = getattr(mod, name)
            setattr(mod, name, nn.Parameter(p.detach().to_global(sbp=sbp)))
    return m


class TrainGraph(nn.Graph):
    def __init__(self, model, tp: bool):
        super().__init__()
        self.model = model
        self.tp = tp
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=1.0))

    def build(self, x, t):
        y = self.model(x)
        if self.tp:
            assert y.sbp == (flow.sbp.partial_sum,), y.sbp
            y = y.to_global(sbp=B)   # the Megatron all-reduce
        loss = ((y - t) ** 2).sum()
        loss.backward()
        return y, loss


def run(tp: bool):
    m = make(tp)
    x, t = flow.tensor(X), flow.tensor(T)
    if tp:
        x, t = flow.tensor(X, placement=PL, sbp=B), flow.tensor(T, placement=PL, sbp=B)
    before = [p.numpy().copy() for p in m.parameters()]
    g = TrainGraph(m, tp)
    ys, losses, grads = [], [], []
    for _ in range(2):
        y, loss = g(x, t)
        ys.append(y.numpy())
        losses.append(float(loss.numpy()))
        now = [p.numpy().copy() for p in m.parameters()]
        grads.append([b - a for b, a in zip(before, now)])   # lr 1: the step is the gradient
        before = now
    return ys, losses, grads, m, g


ys, losses, grads, m, g = run(True)
ys0, losses0, grads0, m0, _ = run(False)
assert m.fc1.weight.sbp == (flow.sbp.split(0),) and m.fc2.weight.sbp == (flow.sbp.split(1),)
for k in range(2):
    np.testing.assert_allclose(ys[k], ys0[k], rtol=1e-12, atol=1e-12, err_msg=f"rank {r}: y{k}")
    np.testing.assert_allclose(losses[k], losses0[k], rtol=1e-12, err_msg=f"rank {r}: loss")
    for j, (a, b) in enumerate(zip(grads[k], grads0[k])):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12,
                                   err_msg=f"rank {r}: step {k} gradient of parameter {j}")
# this rank's Job holds its shards: fc1's weight rows and fc2's weight columns
var = {o.attrs["name"]: o for o in g.full_job.ops if o.op_type == "variable"}
lo, hi = np.array_split(np.arange(H), n)[r][[0, -1]]
assert tuple(var["model.fc1.weight"].outputs[0].shape) == (hi - lo + 1, D)
assert tuple(var["model.fc2.weight"].outputs[0].shape) == (C, hi - lo + 1)
assert var["model.fc2.weight"].tags["global"]["out"] == ("S(1)",)
flow.synchronize()
print(f"OK rank {r}", flush=True)
