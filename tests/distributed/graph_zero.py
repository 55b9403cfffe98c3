"""Run under ``mpiexec -n N``: ZeRO in the distributed nn.Graph. A data-parallel MLP
(parameters broadcast, the batch split(0), float64) trained with ``enable_zero(stage=1|2)``
gives the losses and parameters of plain graph data parallelism, with SGD momentum and Adam;
the optimizer state is split(0) (each rank keeps 1/N of it: the state variables' bytes in the
Job shrink by N); stage 1 all-reduces the gradients, stage 2 reduce-scatters them; the updated
shard is all-gathered back. argv[1]: "vm" for the reference executor; argv[2]: "short" for one
optimizer and stage (4 ranks). Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.compiler.plan import _aligned
from actorflow.dispatch.lazy_global import boxing_report
from actorflow.framework.sbp_parallel import nd_attrs
from actorflow.nn.graph.zero import optimizer_state_bytes

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
SHORT = len(sys.argv) > 2 and sys.argv[2] == "short"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(3)
N, D, H, C = 4 * n + 2, 16, 16 * n + 1, 4  # H rows: uneven shards
X = rng.standard_normal((N, D))
Y = rng.integers(0, C, size=N)
STEPS = 3


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, stage):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y, reduction="sum") / N
        loss.backward()
        return loss


def run(make_opt, stage):
    flow.manual_seed(5)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)).to(flow.float64)
    m.to_global(placement=PL, sbp=B)
    opt = make_opt(m.parameters())
    g = TrainGraph(m, opt, stage)
    x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    losses = [float(g(x, y).numpy()) for _ in range(STEPS)]
    return [p.numpy() for p in m.parameters()], losses, g, opt, m


def state_bytes(opt, local, moments_only=False) -> int:
    """The bytes (64-byte aligned, as the Plan's registers) of ``opt``'s state on this rank."""
    total = 0
    for st in opt.state.values():
        for v in st.values():
            if isinstance(v, flow.Tensor) and (v.dim() > 0 or not moments_only):
                total += _aligned(local(v).nbytes)
    return total


OPTS = {"sgd": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9),
        "adam": lambda ps: flow.optim.Adam(ps, lr=0.05)}
cases = [("adam", 2)] if SHORT else [(o, s) for o in OPTS for s in (1, 2)]
for opt_name, stage in cases:
    ref_p, ref_l, ref_g, ref_opt, _ = run(OPTS[opt_name], 0)
    z_p, z_l, g, opt, m = run(OPTS[opt_name], stage)
    what = f"rank {r}: {opt_name} stage {stage}"
    np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"{what} losses")
    for k, (a, b) in enumerate(zip(z_p, ref_p)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"{what} param {k}")
    assert z_l[-1] < z_l[0], z_l
    # each rank keeps its rows of every state tensor of a parameter's shape
    for p in m.parameters():
        for key, s in opt.state[p].items():
            if tuple(s.shape) == tuple(p.shape):
                assert nd_attrs(s.sbp) == (("S", 0),), (what, key, s.sbp)
                rows = s.to_local().shape[0]
                assert rows in (p.shape[0] // n, p.shape[0] // n + 1), (what, key, rows)
    # the Plan's optimizer-state registers hold this rank's shards: the moments shrink by n
    full, sharded = optimizer_state_bytes(ref_g), optimizer_state_bytes(g)
    assert full == state_bytes(ref_opt, lambda t: t.numpy()), (what, full)
    assert sharded == state_bytes(opt, lambda t: t.to_local().numpy()), (what, sharded)
    moments = state_bytes(ref_opt, lambda t: t.numpy(), moments_only=True)
    # per moment tensor at most one row more than 1/n, and the 64-byte alignment
    slack = sum(64 + v.numpy()[0].nbytes for st in ref_opt.state.values()
                for v in st.values() if v.dim() > 0)
    assert sharded - (full - moments) <= moments / n + slack, (what, full, sharded, moments)
    assert sharded - (full - moments) < moments / (n - 0.5), (what, full, sharded, moments)
    report = "\n".join(boxing_report(g.full_job))
    types = [o.op_type for o in g.full_job.ops if "boxing" in o.tags]
    if stage == 1:
        assert "boxing_p_to_b" in types and "boxing_p_to_s" not in types, report
    else:
        assert "boxing_p_to_s" in types and "boxing_p_to_b" not in types, report
    assert "model.0.weight zero gather: S(0) -> B" in report, report
    # each all-gather runs after the update that wrote its shard in place (a control edge)
    ops = {o.name: o for o in g.full_job.ops}
    gathers = [o for o in ops.values()
               if o.tags.get("boxing", {}).get("reason", "").endswith("zero gather")]
    assert len(gathers) == 4, report
    for o in gathers:
        assert any(ops[c].op_type.endswith("_update") for c in o.ctrl_inputs), (o.name, report)
# a gradient traced without a global producer (the bias of a sum: a folded constant) counts
# as broadcast, as without ZeRO
class SumGraph(nn.Graph):
    def __init__(self, model, opt, stage):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)

    def build(self, x):
        loss = self.model(x).sum()
        loss.backward()
        return loss


def run_sum(stage):
    flow.manual_seed(5)
    m = nn.Linear(D, 2 * n).to(flow.float64)
    m.to_global(placement=PL, sbp=B)
    g = SumGraph(m, flow.optim.Adam(m.parameters(), lr=0.1), stage)
    x = flow.tensor(X, placement=PL, sbp=S0)
    return [float(g(x).numpy()) for _ in range(STEPS)], [p.numpy() for p in m.parameters()]


(ref_l, ref_p), (z_l, z_p) = run_sum(0), run_sum(2)
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: sum losses")
for a, b in zip(z_p, ref_p):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"rank {r}: sum params")

# LAMB's update is not elementwise (its trust ratio reads the whole parameter): it stays
# broadcast, state and all, and trains as plain data parallelism
lamb = lambda ps: flow.optim.LAMB(ps, lr=0.05)  # noqa: E731
(ref_p, ref_l, *_), (z_p, z_l, _, opt, m) = run(lamb, 0), run(lamb, 2)
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: LAMB losses")
for a, b in zip(z_p, ref_p):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=f"rank {r}: LAMB")
assert all(nd_attrs(s.sbp) == (("B",),) for st in opt.state.values() for s in st.values())
flow.synchronize()
print(f"OK rank {r}", flush=True)
