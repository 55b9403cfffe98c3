"""Run under ``mpiexec -n N``: ZeRO stage 3's ``shard_restore_level`` (OneFlow's) in the
distributed nn.Graph. A data-parallel model (Embedding, LayerNorm, two Linear layers; the
parameters broadcast, the batch split(0), float64) trained with ``enable_zero(stage=3,
shard_restore_level=L)`` for L = 0, 1, 2 gives plain data parallelism's losses and
``state_dict()`` (rtol 1e-10, atol 1e-12: level 0 sums in another order), with SGD momentum
and Adam, with gradient clipping (levels 0, 1) and with 2 micro-batches of gradient
accumulation. The Jobs differ as the levels say: level 0 gathers nothing (the first Linear
keeps its weight split(0) and splits its output's features), level 1 gathers each shard with
no boxing in the gather's backward (the gradient is boxed to split(0) by the update, once
per call), level 2 gathers it and reduce-scatters the gradient in backward (per
micro-batch). Every update reads a split(0) gradient. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.dispatch.lazy_global import boxing_report
from actorflow.framework.sbp_parallel import nd_attrs

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(7)
N, V, D, H, C = 4 * n, 8 * n + 1, 8 * n, 16 * n + 1, 4  # V, H rows: uneven shards
X = rng.integers(0, V, size=N)
Y = rng.integers(0, C, size=N)
STEPS = 3
MIN = 8  # the last bias (C = 4 elements) stays broadcast
SHARDED = ("model.0.weight", "model.1.weight", "model.1.bias", "model.2.weight",
           "model.2.bias", "model.4.weight")
TOL = {"rtol": 1e-10, "atol": 1e-12}


class TrainGraph(nn.Graph):
    def __init__(self, model, opt, level, acc):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.config.set_gradient_accumulation_steps(acc)
        if level is not None:
            self.config.enable_zero(True, stage=3, shard_min_size=MIN,
                                    shard_restore_level=level)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y, reduction="sum") / N
        loss.backward()
        return loss


def run(make_opt, level, acc=1):
    """Losses, state_dict values and the graph of STEPS steps (level None: no ZeRO)."""
    flow.manual_seed(5)
    m = nn.Sequential(nn.Embedding(V, D), nn.LayerNorm(D), nn.Linear(D, H), nn.ReLU(),
                      nn.Linear(H, C)).to(flow.float64)
    m.to_global(placement=PL, sbp=B)
    g = TrainGraph(m, make_opt(m.parameters()), level, acc)
    x, y = flow.tensor(X, placement=PL, sbp=S0), flow.tensor(Y, placement=PL, sbp=S0)
    losses = [g(x, y).numpy() for _ in range(STEPS)]
    return losses, {k: v.numpy() for k, v in m.state_dict().items()}, g, m


def check_same(what, got, ref):
    np.testing.assert_allclose(got[0], ref[0], **TOL, err_msg=f"rank {r}: {what} losses")
    assert got[1].keys() == ref[1].keys()
    for k in ref[1]:
        np.testing.assert_allclose(got[1][k], ref[1][k], **TOL,
                                   err_msg=f"rank {r}: {what} state_dict {k}")


def boxings(job, reason: str) -> list:
    """The boxing ops of ``job`` whose reason is ``reason``."""
    return [o for o in job.ops if o.tags.get("boxing", {}).get("reason") == reason]


def check_updates(what, job):
    """Every update of a sharded parameter runs on split(0) parameter and gradient."""
    updates = [o for o in job.ops if "global" in o.tags and o.tags["phase"] == "optimizer"
               and o.op_type.endswith("_update")]
    assert updates, what
    for o in updates:
        param = o.inputs[0].split("/")[0]
        if param in SHARDED:
            assert o.tags["global"]["in"][:2] == ("S(0)", "S(0)"), (what, o.name, o.tags)


def check_protocol(level, g, acc):
    what = f"rank {r}: level {level} acc {acc}"
    job = g.full_job
    report = "\n".join(boxing_report(job))
    check_updates(what, job)
    for name in SHARDED:
        gather, grad = boxings(job, f"{name} zero-3 gather"), boxings(job, f"{name} zero-3 grad")
        if level == 0:
            assert not gather, (what, report)
            continue
        assert [o.op_type for o in gather] == ["boxing_s_to_b"], (what, name, report)
        assert {o.tags.get("stage", "micro") for o in gather} == {"micro"}, (what, name)
        assert [o.op_type for o in grad] == ["boxing_p_to_s"], (what, name, report)
        # level 1: boxed where the update reads it (once per call); level 2: the gather's
        # backward (per micro-batch)
        phase = {1: "optimizer", 2: "backward"}[level]
        assert grad[0].tags["phase"] == phase, (what, name, grad[0].tags)
        if acc > 1:
            assert grad[0].tags["stage"] == {1: "post", 2: "micro"}[level], (what, name)
    if level == 0:
        assert "zero-3 gather" not in report, (what, report)
        # the first Linear keeps its weight split(0) (and the bias): its output features split
        lin = [o for o in job.ops if o.op_type == "linear" and o.scope == "model.2"
               and o.tags["phase"] == "forward"]
        assert len(lin) == 1 and lin[0].tags["global"]["in"] == ("B", "S(0)", "S(0)"), \
            (what, [o.tags for o in lin])
        assert lin[0].tags["global"]["out"] == ("S(1)",), (what, lin[0].tags)
    if level == 1:  # nothing in backward is boxed for a shard's gradient at the gather
        assert not [o for o in job.ops if o.tags.get("phase") == "backward" and
                    "zero-3" in o.tags.get("boxing", {}).get("reason", "")], (what, report)


OPTS = {"sgd": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9),
        "adam": lambda ps: flow.optim.Adam(ps, lr=0.05)}
for opt_name, make in OPTS.items():
    ref = run(make, None)
    for level in (0, 1, 2):
        got = run(make, level)
        check_same(f"{opt_name} level {level}", got, ref)
        params = dict(got[3].named_parameters())
        for name, p in params.items():
            want = (("B",),) if name == "4.bias" else (("S", 0),)
            assert nd_attrs(p.sbp) == want, (opt_name, level, name, p.sbp)
        if opt_name == "adam":
            check_protocol(level, got[2], 1)
    assert ref[0][-1] < ref[0][0], ref[0]

# gradient clipping reads the gradients as they reach the update (partial sums at levels 0/1)
clipped = lambda ps: flow.optim.Adam([{"params": list(ps), "clip_grad_max_norm": 0.05,  # noqa: E731
                                       "clip_grad_norm_type": 2.0}], lr=0.05)
ref = run(clipped, None)
for level in (0, 1):
    check_same(f"clipped level {level}", run(clipped, level), ref)

# gradient accumulation: level 1 accumulates the partial sums and boxes once per call,
# level 2 reduce-scatters per micro-batch, level 0 boxes as the ops chose
ref = run(OPTS["adam"], None, 2)
for level in (0, 1, 2):
    got = run(OPTS["adam"], level, 2)
    check_same(f"acc level {level}", got, ref)
    check_protocol(level, got[2], 2)
flow.synchronize()
print(f"OK rank {r}", flush=True)
