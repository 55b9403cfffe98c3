"""Run under ``mpiexec -n 2``: gradient accumulation in a data-parallel nn.Graph whose
micro-batches run collectives (issue #15). The batch is split(0); in build the hidden
activation is gathered to broadcast and split again, so each micro-batch runs collectives
forward and backward, and the parameters' partial-sum gradients are all-reduced once per
iteration after the micro-batches. The losses (summed over micro-batches) and the parameters
after each SGD-momentum step equal one process (a local Graph with the same accumulation
steps, and eager code on the full batch). The comm thread's schedule counts micro-batches.
argv[1]: "vm" for the reference executor. Prints ``OK rank R``."""
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
ACC = 2
rng = np.random.default_rng(7)
N, D, H, C = 4 * n, 5, 6, 3
X = rng.standard_normal((N, D))
T = rng.standard_normal((N, C))
STEPS, LR = 3, 0.05


def make(glob: bool) -> nn.Module:
    flow.manual_seed(3)
    m = nn.Sequential(nn.Linear(D, H), nn.Linear(H, C)).to(flow.float64)
    if glob:
        m.to_global(placement=PL, sbp=B)
    return m


class Train(nn.Graph):
    def __init__(self, m: nn.Module, glob: bool):
        super().__init__()
        self.m, self.glob = m, glob
        self.add_optimizer(flow.optim.SGD(m.parameters(), lr=LR, momentum=0.9))
        self.config.set_gradient_accumulation_steps(ACC)

    def build(self, x, t):
        h = self.m[0](x)
        if self.glob:   # collectives per micro-batch, forward and backward
            h = h.to_global(sbp=B)
        h = flow.relu(h)
        if self.glob:
            h = h.to_global(sbp=S0)
        loss = ((self.m[1](h) - t) ** 2).sum()
        loss.backward()
        return loss


def run(glob: bool):
    m = make(glob)
    x, t = flow.tensor(X), flow.tensor(T)
    if glob:
        x, t = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(T, placement=PL, sbp=S0)
    g = Train(m, glob)
    losses, params = [], []
    for _ in range(STEPS):
        losses.append(float(g(x, t).numpy().sum()))
        params.append([p.numpy().copy() for p in m.parameters()])
    return losses, params, g


def eager():
    """One process, full batch: the graph scales each micro-batch's loss by 1 / ACC."""
    m = make(False)
    opt = flow.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    losses, params = [], []
    for _ in range(STEPS):
        loss = ((m[1](flow.relu(m[0](flow.tensor(X)))) - flow.tensor(T)) ** 2).sum()
        (loss / ACC).backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.numpy()))
        params.append([p.numpy().copy() for p in m.parameters()])
    return losses, params


ref_l, ref_p = eager()
loc_l, loc_p, _ = run(False)
gl_l, gl_p, g = run(True)
for name, (ls, ps) in {"local graph": (loc_l, loc_p), "global graph": (gl_l, gl_p)}.items():
    np.testing.assert_allclose(ls, ref_l, rtol=1e-10, err_msg=f"rank {r}: {name} losses")
    for k in range(STEPS):
        for j, (a, b) in enumerate(zip(ps[k], ref_p[k])):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12,
                                       err_msg=f"rank {r}: {name} step {k} parameter {j}")
assert ref_l[-1] < ref_l[0], ref_l
if len(sys.argv) < 2 or sys.argv[1] != "vm":  # the comm thread's schedule counts micro-batches
    coll = sorted((t for t in g.plan.tasks if t.kind == "collective"),
                  key=lambda t: t.attrs["collective_seq"])
    micro = [t for t in coll if t.time_shape == ACC]
    post = [t for t in coll if t.time_shape == 1]
    assert len(micro) >= 2 and post, [(t.op_type, t.time_shape) for t in coll]
    assert coll == micro + post, [(t.op_type, t.time_shape) for t in coll]
    assert all(t.attrs["collective_n"] == ACC for t in coll)
    assert any(t.op_type == "boxing_p_to_b" for t in post), [t.op_type for t in post]
    with flow.profiler.profile() as prof:
        g(flow.tensor(X, placement=PL, sbp=S0), flow.tensor(T, placement=PL, sbp=S0))
        flow.synchronize()
    acts = [e["op"] for e in sorted(prof.acts(), key=lambda e: e["start"])
            if e["kind"] == "collective"]
    names = [t.op_name for t in micro]
    assert acts == names * ACC + [t.op_name for t in post], acts
flow.synchronize()
print(f"OK rank {r}", flush=True)
