"""Run under ``mpiexec -n N``: in-place ops in a distributed nn.Graph (issue #15). A
data-parallel residual MLP with ``nn.ReLU(inplace=True)``, ``y += x`` and ``mul_`` trains to
the same losses and parameters as one process (eagerly and in a local Graph) and as the global
model trained eagerly; ``t[idx] = v`` and ``masked_fill_`` on a split tensor keep the split
(the broadcast setitem's result is boxed back), and a buffer's ``add_`` in build is written
back to the eager buffer. argv[1]: "vm" for the reference executor. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn
from tests.distributed.dp_train import train_four_ways

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(12)
N, D, H, C = 4 * n + 2, 5, 7, 3
X = rng.standard_normal((N, D))
Y = rng.integers(0, C, size=N)
STEPS = 3


class Res(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(D, H), nn.Linear(H, D), nn.Linear(D, C)
        self.act = nn.ReLU(inplace=True)
        self.register_buffer("calls", flow.zeros(1, dtype=flow.float64))

    def forward(self, x):
        h = self.act(self.fc1(x))
        y = self.fc2(h)
        y += x            # the residual, in place
        y.mul_(0.5)
        self.calls.add_(1)
        return self.head(self.act(y))


def make_model(glob: bool):
    flow.manual_seed(7)
    m = Res().to(flow.float64)
    if glob:
        m.to_global(placement=PL, sbp=B)
    return m


runs = train_four_ways(make_model, X, Y, lr=0.2, steps=STEPS)
for name, (m, _, _) in runs.items():
    assert float(m.calls.numpy()[0]) == STEPS, (name, m.calls.numpy())
g = runs["global graph"][2]
# the in-place ops kept their operands' layout: no boxing in the forward pass
fwd = [o for o in g.forward_job.ops if "boxing" in o.tags]
assert not fwd, [o.name for o in fwd]
adds = [o for o in g.forward_job.ops if o.op_type == "add" and o.tags.get("global")]
assert any(o.tags["global"]["out"] == ("S(0)",) for o in adds), [o.tags for o in adds]

# setitem and masked_fill_ on a split tensor keep the split
XV = rng.standard_normal((2 * n + 1, 4))
MV = rng.standard_normal((2 * n + 1, 4)) > 0.3


class Write(nn.Graph):
    def build(self, x, mask):
        y = x * 1.0
        y[1] = 7.0
        y[:, 2] = -3.0
        y.masked_fill_(mask, 0.5)
        return y


g = Write()
out = g(flow.tensor(XV, placement=PL, sbp=S0), flow.tensor(MV, placement=PL, sbp=B))
want = XV.copy()
want[1], want[:, 2] = 7.0, -3.0
want[MV] = 0.5
assert out.sbp == (S0,), out.sbp
np.testing.assert_array_equal(out.numpy(), want)
back = [o for o in g.forward_job.ops if "boxing" in o.tags
        and o.tags["boxing"]["reason"].startswith("setitem_ keeps")]
assert back and all(o.tags["boxing"]["to"] == "S(0)" for o in back), \
    [(o.name, o.tags.get("boxing")) for o in g.forward_job.ops]
flow.synchronize()
print(f"OK rank {r}", flush=True)
