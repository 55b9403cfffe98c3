"""Run under ``mpiexec -n N`` (N = 4: a 2x2 placement ``[[0, 1], [2, 3]]``; N = 2: hierarchy
(1, 2)): data x tensor parallel MLP trained in an nn.Graph - the batch ``(split(0),
broadcast)``, fc1's weight and bias ``(broadcast, split(0))`` (split by output features over
axis 1), fc2's weight ``(broadcast, split(1))`` and bias broadcast, its partial-sum output
made ``(split(0), broadcast)`` by ``to_global`` in build, SGD with momentum - gives
the losses and parameters of one process on the full batch, on both graph executors (argv[1]:
"vm" for the reference executor). The Job shows the 2-D sbp, every collective runs on a
communicator of the ranks along one hierarchy axis, in one numbered schedule. Prints
``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
assert n in (2, 4), "run me under mpiexec -n 2 or 4"
PL = flow.placement("cpu", [[0, 1], [2, 3]] if n == 4 else [[0, 1]])
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
rng = np.random.default_rng(13)
N, D, H, C = 7, 4, 5, 3          # uneven: 7 rows over 2 groups, 5 hidden over 2 ranks
X = rng.standard_normal((N, D))
Y = rng.integers(0, C, size=N)
STEPS = 3


def make(glob: bool):
    flow.manual_seed(21)
    m = nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, C)).to(flow.float64)
    if glob:  # the same values, laid out over the 2-D placement
        m.to_global(placement=PL, sbp=(B, B))
        for mod, name, sbp in ((m[0], "weight", (B, S0)), (m[0], "bias", (B, S0)),
                               (m[2], "weight", (B, S1))):
            p = getattr(mod, name)
            setattr(mod, name, nn.Parameter(p.detach().to_global(sbp=sbp)))
    return m


class TrainGraph(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        out = self.model(x)
        assert out.sbp == (S0, flow.sbp.partial_sum), out.sbp
        out = out.to_global(sbp=(S0, B))   # the tensor-parallel all-reduce, over axis 1
        loss = nn.functional.cross_entropy(out, y, reduction="sum") / N
        loss.backward()
        return loss


def run(glob: bool):
    m = make(glob)
    opt = flow.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    x, y = flow.tensor(X), flow.tensor(Y)
    if glob:
        x, y = flow.tensor(X, placement=PL, sbp=(S0, B)), flow.tensor(Y, placement=PL, sbp=(S0, B))
    g, losses = None, []
    for _ in range(STEPS):
        if glob:
            g = g or TrainGraph(m, opt)
            loss = g(x, y)
            assert loss.is_global and loss.placement == PL, loss
        else:
            loss = nn.functional.cross_entropy(m(x), y, reduction="sum") / N
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(float(loss.numpy()))
    return m, losses, g


ref, ref_l, _ = run(False)
m, losses, g = run(True)
np.testing.assert_allclose(losses, ref_l, rtol=1e-10, err_msg=f"rank {r}: losses")
assert ref_l[-1] < ref_l[0], ref_l
for (k, a), b in zip(m.named_parameters(), ref.parameters()):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=f"rank {r}: parameter {k}")
assert m[0].weight.sbp == (B, S0) and m[2].weight.sbp == (B, S1), m[0].weight.sbp

# the Job shows the 2-D layout: fc1's matmul on the (S(0), B) batch and the (B, S(0)) weight
job = g.full_job
tag = [o.tags["global"] for o in g.forward_job.ops if "global" in o.tags
       and o.op_type in ("linear", "matmul", "fused_linear")]
assert tag and tag[0]["in"][:2] == ("(S(0), B)", "(B, S(0))"), tag
assert tag[0]["placement"] == f"cpu:{PL.ranks.tolist()}", tag
# every collective runs on the graph's communicator of the ranks along one hierarchy axis
coords = np.unravel_index(PL.flat_ranks.index(r), PL.hierarchy)
arr = np.array(PL.ranks)
col, row = tuple(int(v) for v in arr[:, coords[1]]), tuple(int(v) for v in arr[coords[0], :])
along = {col, row}
coll = [o for o in job.ops if "boxing" in o.tags and o.op_type != "boxing_b_to_s"
        and o.op_type != "boxing_b_to_p"]
assert coll, [o.op_type for o in job.ops]
assert all(tuple(o.attrs["ranks"]) in along and len(o.attrs["ranks"]) == 2 for o in coll), \
    [(o.name, o.attrs["ranks"]) for o in coll]
assert len({o.attrs["group"] for o in coll}) == 1 and coll[0].attrs["group"].startswith("graph")
# data parallel: each weight gradient is all-reduced over axis 0 (its column of ranks), the
# split (axis 1) kept; tensor parallel: fc2's partial sums are reduced over axis 1 (the row)
def steps(reason: str) -> list:
    """(op, ranks) of each boxing op for ``reason`` (one per hierarchy axis it changes)."""
    return [(o.op_type, tuple(o.attrs["ranks"])) for o in coll
            if o.tags["boxing"]["reason"] == reason]


out2 = [o for o in coll if o.tags["boxing"]["reason"].startswith("to_global")]
assert [(o.op_type, tuple(o.attrs["ranks"])) for o in out2] == [("boxing_p_to_b", row)], out2
assert (out2[0].tags["boxing"]["from"], out2[0].tags["boxing"]["to"]) == ("(S(0), P)", "(S(0), B)")
# fc2's weight gradient (P, P) -> (B, S(1)): all-reduced over the column, reduce-scattered
# over the row (on hierarchy (1, 2) the column is one rank: nothing to reduce)
w2 = [o for o in coll if o.tags["boxing"]["reason"] == "model.2.weight grad"]
assert {(o.tags["boxing"]["from"], o.tags["boxing"]["to"]) for o in w2} == {("(P, P)", "(B, S(1))")}
want = [("boxing_p_to_b", col)] if n == 4 else []
assert steps("model.2.weight grad") == want + [("boxing_p_to_s", row)], steps("model.2.weight grad")
if n == 4:  # fc1's weight gradient (P, S(0)) -> (B, S(0)): the data-parallel all-reduce
    w = [o for o in coll if o.tags["boxing"]["reason"] == "model.0.weight grad"]
    assert (w[0].tags["boxing"]["from"], w[0].tags["boxing"]["to"]) == ("(P, S(0))", "(B, S(0))")
    assert steps("model.0.weight grad") == [("boxing_p_to_b", col)], steps("model.0.weight grad")
if os.environ.get("ACTORFLOW_RUN_GRAPH_BY_VM") != "1":
    tasks = [t for t in g.plan.tasks if t.kind == "collective"]
    assert len(tasks) == len(coll), (len(tasks), len(coll))
    assert [t.attrs["collective_seq"] for t in tasks] == list(range(len(tasks)))
    assert len({t.task_id >> 24 for t in tasks}) == 1
flow.synchronize()
print(f"OK rank {r}", flush=True)
