"""Run under ``mpiexec -n 2``: moves between placements that share ranks in a distributed
nn.Graph (issue #15). A two-stage model - a linear layer and relu on placement P0, a linear
layer and the loss on P1, the activation moved with ``to_global(placement=P1, sbp=...)`` -
trains as one process (outputs, losses, parameters after each SGD step: the gradients moved
back too), for P0 -> P1 = [0, 1] -> [1], [0] -> [0, 1] (split on arrival), [0, 1] -> [1, 0]
(the same placement: nothing moves) and [0, 1] -> [[0, 1]] (a 2-D target). A rank of both
placements copies what it holds (a ``copy`` op, no send to itself). argv[1]: "vm" for the
reference executor. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n == 2
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(8)
N, D, H, C = 6, 5, 4, 3
X = rng.standard_normal((N, D))
T = rng.standard_normal((N, C))
STEPS, LR = 3, 0.05


def pl(ranks):
    return flow.placement("cpu", ranks)


CASES = [  # (P0, its sbp, P1, the moved activation's and the target's sbp)
    (pl([0, 1]), (S0,), pl([1]), (B,)),
    (pl([0]), (B,), pl([0, 1]), (S0,)),
    (pl([0, 1]), (S0,), pl([1, 0]), (S0,)),
    (pl([0, 1]), (B,), pl([[0, 1]]), (B, S0)),
]

# [0, 1] -> [1, 0] names the same placement (OneFlow sorts a placement's ranks): nothing moves
WANT = [((1, 0), (1, 2)), ((1, 2), (1, 0)), ((0, 0), (0, 0)), ((0, 2), (0, 2))]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage0 = nn.Sequential(nn.Linear(D, H), nn.ReLU())
        self.stage1 = nn.Linear(H, C)


def make(case):
    flow.manual_seed(3)
    m = Net().to(flow.float64)
    if case is not None:
        p0, _, p1, s1 = case
        m.stage0.to_global(placement=p0, sbp=(B,) * len(p0.hierarchy))
        m.stage1.to_global(placement=p1, sbp=(B,) * len(p1.hierarchy))
    return m


class Train(nn.Graph):
    def __init__(self, m, case):
        super().__init__()
        self.m, self.case = m, case
        self.add_optimizer(flow.optim.SGD(m.parameters(), lr=LR))

    def build(self, x, t):
        h = self.m.stage0(x)
        if self.case is not None:
            h = h.to_global(placement=self.case[2], sbp=self.case[3])
        y = self.m.stage1(h)
        loss = ((y - t) ** 2).sum()
        loss.backward()
        return y, loss


def run(case):
    m = make(case)
    x, t = flow.tensor(X), flow.tensor(T)
    if case is not None:
        p0, s0, p1, s1 = case
        x, t = flow.tensor(X, placement=p0, sbp=s0), flow.tensor(T, placement=p1, sbp=s1)
    g = Train(m, case)
    out = []
    for _ in range(STEPS):
        y, loss = g(x, t)
        out.append((y.numpy(), loss.numpy(), [p.numpy().copy() for p in m.parameters()]))
    return out, g


ref, _ = run(None)
for case in CASES:
    got, g = run(case)
    for k in range(STEPS):
        np.testing.assert_allclose(got[k][0], ref[k][0], rtol=1e-12, atol=1e-12,
                                   err_msg=f"rank {r}: {case}: y{k}")
        np.testing.assert_allclose(got[k][1], ref[k][1], rtol=1e-12,
                                   err_msg=f"rank {r}: {case}: loss{k}")
        for j, (a, b) in enumerate(zip(got[k][2], ref[k][2])):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12,
                                       err_msg=f"rank {r}: {case}: step {k} parameter {j}")
    # per rank: sends and receives, then copies (forward and back): a transfer only between
    # a rank of one placement alone and the other placement's first rank
    kinds = [o.op_type for o in g.full_job.ops]
    moved = (kinds.count("pipe_send") + kinds.count("pipe_recv"), kinds.count("copy"))
    assert moved == WANT[CASES.index(case)][r], (r, case, kinds)
assert ref[-1][1] < ref[0][1]
flow.synchronize()
print(f"OK rank {r}", flush=True)
