"""Run under ``mpiexec -n N``: ZeRO stage 3 in the distributed nn.Graph. A data-parallel MLP
(parameters broadcast, the batch split(0), float64) trained with ``enable_zero(stage=3)`` (the
default ``shard_restore_level`` 1; each level: ``graph_zero3_levels.py``) gives
the losses, parameters and ``state_dict()`` of plain graph data parallelism (and of stage 2),
with SGD momentum and Adam; between steps each eligible parameter is split(0) (each rank holds
its rows: the Plan's parameter registers shrink by N, next to stages 0, 1 and 2), the Job
all-gathers it for use (reason ``zero-3 gather``), reduce-scatters its gradient and gathers
nothing after the update. Also: gradient accumulation with stage 3, eager use of the model
after stage-3 steps, LAMB left broadcast. argv[1]: "vm" for the reference executor. Prints
``OK rank R`` and, on rank 0, one ``BYTES`` line per optimizer with the memory plan's figures
of stages 0-3."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.dispatch.lazy_global import boxing_report
from actorflow.framework.sbp_parallel import nd_attrs
from actorflow.nn.graph.zero import optimizer_state_bytes, parameter_bytes

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(3)
N, D, H, C = 4 * n, 16, 16 * n + 1, 4  # H rows: uneven shards
X = rng.standard_normal((N, D))
Y = rng.integers(0, C, size=N)
STEPS = 3
MIN = 8  # shards under 8 elements stay broadcast: the last bias (C = 4 elements)


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, stage, acc=1):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.set_gradient_accumulation_steps(acc)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=MIN)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y, reduction="sum") / N
        loss.backward()
        return loss


def run(make_opt, stage, acc=1):
    flow.manual_seed(5)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)).to(flow.float64)
    m.to_global(placement=PL, sbp=B)
    opt = make_opt(m.parameters())
    g = TrainGraph(m, opt, stage, acc)
    x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    losses = [g(x, y).numpy().sum() for _ in range(STEPS)]
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    return losses, sd, g, opt, m


OPTS = {"sgd": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9),
        "adam": lambda ps: flow.optim.Adam(ps, lr=0.05)}
for opt_name, make in OPTS.items():
    runs = {stage: run(make, stage) for stage in (0, 1, 2, 3)}
    ref_l, ref_sd = runs[0][:2]
    z_l, z_sd, g, opt, m = runs[3]
    what = f"rank {r}: {opt_name} stage 3"
    for stage in (2, 0):
        np.testing.assert_allclose(z_l, runs[stage][0], rtol=1e-12,
                                   err_msg=f"{what} losses vs stage {stage}")
        assert z_sd.keys() == runs[stage][1].keys()
        for k in z_sd:
            np.testing.assert_allclose(z_sd[k], runs[stage][1][k], rtol=1e-12, atol=1e-14,
                                       err_msg=f"{what} state_dict {k} vs stage {stage}")
    assert z_l[-1] < z_l[0], z_l
    # between steps the eligible parameters are split(0), the small bias stays broadcast
    params = dict(m.named_parameters())
    for name, p in params.items():
        want = (("B",),) if name == "2.bias" else (("S", 0),)
        assert nd_attrs(p.sbp) == want, (what, name, p.sbp)
        if want != (("B",),):
            rows = p.to_local().shape[0]
            assert rows in (p.shape[0] // n, p.shape[0] // n + 1), (what, name, rows)
            for key, s in opt.state[p].items():
                if tuple(s.shape) == tuple(p.shape):
                    assert nd_attrs(s.sbp) == (("S", 0),), (what, name, key, s.sbp)
    # the memory plan: parameter registers shrink by n in stage 3 only
    full = parameter_bytes(runs[0][2])
    small = params["2.bias"].numel() * 8
    for stage in (1, 2):
        assert parameter_bytes(runs[stage][2]) == full, (what, stage)
    sharded = parameter_bytes(g)
    assert sharded == sum(64 * -(-p.to_local().numpy().nbytes // 64)
                          for p in params.values()), (what, sharded)
    assert sharded < (full - small) / (n - 0.5) + small + 64 * len(params), (what, full, sharded)
    if r == 0:
        print("BYTES", opt_name, n, " ".join(
            f"stage{s}: params {parameter_bytes(gs)} state {optimizer_state_bytes(gs)} "
            f"plan {next(reversed(gs._cache.values())).plan.memory['bytes_with_sharing']}"
            for s, gs in ((s, runs[s][2]) for s in (0, 1, 2, 3))), flush=True)
    # the Job: each eligible parameter all-gathered for use, its gradient reduce-scattered,
    # no gather after its update
    report = "\n".join(boxing_report(g.full_job))
    for name in ("model.0.weight", "model.0.bias", "model.2.weight"):
        assert f"{name} zero-3 gather: S(0) -> B" in report, report
        assert f"{name} zero gather" not in report, report
    assert "model.2.bias zero-3 gather" not in report, report
    types = [o.op_type for o in g.full_job.ops if "boxing" in o.tags]
    assert types.count("boxing_s_to_b") == 3, report
    assert types.count("boxing_p_to_s") == 3, report
    for name in ("model.0.weight", "model.0.bias", "model.2.weight"):
        assert f"{name} zero-3 grad: P -> S(0) reduce-scatter" in report, report
    # (the broadcast bias: all-reduced, as without ZeRO)
    assert types.count("boxing_p_to_b") == 1, report
    assert "model.2.bias grad: P -> B all-reduce" in report, report

# gradient accumulation (2 micro-batches): each micro-batch gathers the shards, their
# partial-sum gradients accumulate and are reduce-scattered once, one update on the shard
(ref_l, ref_sd, _, _, ref_m), (z_l, z_sd, g, _, m) = (run(OPTS["adam"], 0, 2),
                                                       run(OPTS["adam"], 3, 2))
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: acc losses")
for k in ref_sd:
    np.testing.assert_allclose(z_sd[k], ref_sd[k], rtol=1e-12, atol=1e-14,
                               err_msg=f"rank {r}: acc state_dict {k}")
assert nd_attrs(m[0].weight.sbp) == (("S", 0),), m[0].weight.sbp
stages = {o.tags.get("stage") for o in g.full_job.ops if o.op_type == "boxing_s_to_b"}
assert stages == {"micro"}, stages
stages = {o.tags.get("stage") for o in g.full_job.ops if o.op_type == "boxing_p_to_s"}
assert stages == {"post"}, stages
# eager use of the model after stage-3 steps sees the full values (the shards are gathered)
x = flow.tensor(X, placement=PL, sbp=S0)
np.testing.assert_allclose(m(x).numpy(), ref_m(x).numpy(), rtol=1e-12, atol=1e-14)

# a second stage-3 graph over the same model and optimizer gathers the shards as well
def second_graph(stage):
    _, _, _, opt, m = run(OPTS["sgd"], stage)
    g2 = TrainGraph(m, opt, stage)
    loss = g2(flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0))
    return loss.numpy(), {k: v.numpy() for k, v in m.state_dict().items()}, g2


(ref_l, ref_sd, _), (z_l, z_sd, g2) = second_graph(0), second_graph(3)
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: second graph loss")
for k in ref_sd:
    np.testing.assert_allclose(z_sd[k], ref_sd[k], rtol=1e-12, atol=1e-14, err_msg=k)
assert "model.0.weight zero-3 gather" in "\n".join(boxing_report(g2.full_job))

# LAMB's update reads the whole parameter: its parameters and state stay broadcast
lamb = lambda ps: flow.optim.LAMB(ps, lr=0.05)  # noqa: E731
(ref_l, ref_sd, *_), (z_l, z_sd, _, opt, m) = run(lamb, 0), run(lamb, 3)
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: LAMB losses")
for k in ref_sd:
    np.testing.assert_allclose(z_sd[k], ref_sd[k], rtol=1e-12, atol=1e-14, err_msg=k)
assert all(nd_attrs(p.sbp) == (("B",),) for p in m.parameters())
assert all(nd_attrs(s.sbp) == (("B",),) for st in opt.state.values() for s in st.values())

# a loss that is a plain sum of the output: the seed gradient (ones_like of the global loss)
# must be a global tensor of the trace, since it reaches the gather of the sharded last bias
# (every parameter sharded here) through local-looking ops only
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


def sum_run(stage):
    flow.manual_seed(5)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, 2 * n)).to(flow.float64)
    m.to_global(placement=PL, sbp=B)
    g = SumGraph(m, flow.optim.SGD(m.parameters(), lr=0.01), stage)
    x = flow.tensor(X, placement=PL, sbp=S0)
    return [g(x).numpy().sum() for _ in range(STEPS)], m


(ref_l, ref_m), (z_l, m) = sum_run(0), sum_run(3)
np.testing.assert_allclose(z_l, ref_l, rtol=1e-12, err_msg=f"rank {r}: sum-loss losses")
assert nd_attrs(m[2].bias.sbp) == (("S", 0),), m[2].bias.sbp
for (k, a), b in zip(m.state_dict().items(), ref_m.state_dict().values()):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14, err_msg=k)
flow.synchronize()
print(f"OK rank {r}", flush=True)
