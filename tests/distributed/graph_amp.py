"""Run under ``mpiexec -n N``: AMP in a distributed nn.Graph (``config.enable_amp``, issue #15).
A data-parallel MLP (parameters broadcast, the batch split) and a tensor-parallel one (the
first weight split by output features, the second by input features) train with float16
matmuls to losses and parameters close to the one-process AMP graph's (the half-precision
all-reduces and partial sums round differently); the casts the AMP pass inserts carry the
placement and sbp of the blob they cast. argv[1]: "vm" for the reference executor. Prints
``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
rng = np.random.default_rng(21)
N, D, H, C = 4 * n, 8, 6 * n, 4
X = rng.standard_normal((N, D)).astype(np.float32)
Y = rng.integers(0, C, size=N)
STEPS = 3


def make_model(mode):
    flow.manual_seed(9)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C))
    if mode == "dp":
        m.to_global(placement=PL, sbp=B)
    elif mode == "tp":
        m[0].weight.data = m[0].weight.to_global(placement=PL, sbp=B).to_global(sbp=S0)
        m[0].bias.data = m[0].bias.to_global(placement=PL, sbp=B).to_global(sbp=S0)
        m[2].weight.data = m[2].weight.to_global(placement=PL, sbp=B).to_global(sbp=S1)
        m[2].bias.data = m[2].bias.to_global(placement=PL, sbp=B)
        assert m[0].weight.sbp == (S0,) and m[2].weight.sbp == (S1,)
    return m


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.enable_amp(True)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def run(mode):
    m = make_model(mode)
    opt = flow.optim.SGD(m.parameters(), lr=0.5)
    x, y = flow.tensor(X), flow.tensor(Y)
    if mode == "dp":
        x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    elif mode == "tp":
        x, y = flow.tensor(X, placement=PL, sbp=B), flow.tensor(Y, placement=PL, sbp=B)
    g = TrainGraph(m, opt)
    losses = [float(g(x, y).numpy()) for _ in range(STEPS)]
    return [p.numpy() for p in m.parameters()], losses, g


ref_p, ref_l, ref_g = run(None)
assert ref_l[-1] < ref_l[0], ref_l
for mode in ("dp", "tp"):
    ps, ls, g = run(mode)
    np.testing.assert_allclose(ls, ref_l, rtol=5e-3, err_msg=f"rank {r}: {mode} losses")
    for k, (a, b) in enumerate(zip(ps, ref_p)):
        assert a.dtype == np.float32, (mode, k, a.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=2e-3,
                                   err_msg=f"rank {r}: {mode} parameter {k}")
    job = g.full_job
    if mode == "tp":  # the row-parallel matmul's partial sums are reduced, in half precision
        assert any(o.op_type.startswith("boxing_p_to") and o.outputs[0].dtype is flow.float16
                   and o.tags["phase"] == "forward" for o in job.ops), job.summary()
    mm = [o for o in job.ops if o.op_type in ("linear", "matmul")]
    assert mm and all(o.outputs[0].dtype is flow.float16 for o in mm), \
        [(o.name, o.outputs[0].dtype) for o in mm]
    casts = [o for o in job.ops if o.op_type == "cast" and "amp_cast" in o.name]
    assert casts, [o.name for o in job.ops]
    for o in casts:   # a cast keeps the placement and sbp of what it casts
        tag = o.tags.get("global")
        assert tag is not None and tag["in"] == tag["out"], (o.name, tag)
        src = next(p for p in job.ops if o.inputs[0] in [p.out(i) for i in
                                                         range(len(p.outputs))])
        k = [src.out(i) for i in range(len(src.outputs))].index(o.inputs[0])
        assert tag["out"][0] == src.tags["global"]["out"][k], (o.name, tag, src.tags)
flow.synchronize()
print(f"OK rank {r}", flush=True)
