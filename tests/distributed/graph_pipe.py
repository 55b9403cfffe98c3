"""Run under ``mpiexec -n 2`` (or 4): a two-stage pipeline in an nn.Graph - stage 0 (a linear
layer and relu) placed on the first half of the ranks, stage 1 (a linear layer and the loss)
on the second half (on 4 ranks each stage data parallel, the batch split), the activation
moved between them with ``to_global(placement=...)`` in build or by ``set_stage`` - trains as
one process: outputs, losses and parameters after each SGD step. Each rank's Job holds only
its stage's ops and its send/recv; the Plan runs them as send/recv tasks on the p2p thread.
argv[1]: "vm" for the reference executor; argv[2]: gradient accumulation steps (on 2 ranks:
micro-batches flow through the stages concurrently, rank 0 sends micro-batch 1's activation
before rank 1 sends micro-batch 0's gradient back). Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
half = list(range(n))
P0, P1 = flow.placement("cpu", half[:n // 2]), flow.placement("cpu", half[n // 2:])
B = flow.sbp.broadcast
# on 4 ranks each stage is data parallel over its two ranks: the batch split, the moved
# activation too (gathered on the source stage, sent by its first rank, sliced on arrival)
L = flow.sbp.split(0) if n > 2 else B
rng = np.random.default_rng(5)
ACC = int(sys.argv[2]) if len(sys.argv) > 2 else 1
N, D, H, C = 8, 6, 7, 3
X = rng.standard_normal((N, D))
T = rng.standard_normal((N, C))
STEPS, LR = 3, 0.02


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage0 = nn.Sequential(nn.Linear(D, H), nn.ReLU())
        self.stage1 = nn.Linear(H, C)


def make(pipe: bool) -> Net:
    flow.manual_seed(4)
    m = Net().to(flow.float64)
    if pipe:
        m.stage0.to_global(placement=P0, sbp=B)
        m.stage1.to_global(placement=P1, sbp=B)
    return m


class Train(nn.Graph):
    def __init__(self, m: Net, pipe: bool):
        super().__init__()
        self.m = m
        self.pipe = pipe
        self.add_optimizer(flow.optim.SGD(m.parameters(), lr=LR))
        if ACC > 1:
            self.config.set_gradient_accumulation_steps(ACC)

        if pipe == "set_stage":   # OneFlow's way: the graph moves the stage's inputs
            from actorflow.nn.graph import GraphModule

            self.m.stage0.to(GraphModule).set_stage(0, P0)
            self.m.stage1.to(GraphModule).set_stage(1, P1)

    def build(self, x, t):
        h = self.m.stage0(x)
        if self.pipe is True:
            h = h.to_global(placement=P1, sbp=L)   # stage 0 -> stage 1
        y = self.m.stage1(h)
        loss = ((y - t) ** 2).sum()
        loss.backward()
        return y, loss


def run(pipe: bool):
    m = make(pipe)
    x, t = flow.tensor(X), flow.tensor(T)
    if pipe:
        x, t = flow.tensor(X, placement=P0, sbp=L), flow.tensor(T, placement=P1, sbp=L)
    g = Train(m, pipe)
    ys, losses, params = [], [], []
    for _ in range(STEPS):
        y, loss = g(x, t)
        ys.append(y.numpy())
        losses.append(loss.numpy())
        params.append([p.numpy().copy() for p in m.parameters()])
    return ys, losses, params, g


ys0, losses0, params0, _ = run(False)
if ACC > 1 and n > 2:
    # a micro-batch of a split batch holds a slice of each rank's rows, one of the local graph
    # consecutive rows: the per-micro-batch losses differ, their sum (and the update) does not
    losses0 = [v.sum() for v in losses0]
ys1, losses1, params1, g1 = run("set_stage")
ys, losses, params, g = run(True)
if ACC > 1 and n > 2:
    losses1, losses = [v.sum() for v in losses1], [v.sum() for v in losses]
for k in range(STEPS):
    np.testing.assert_allclose(ys1[k], ys0[k], rtol=1e-12, atol=1e-12, err_msg=f"rank {r}")
    np.testing.assert_allclose(losses1[k], losses0[k], rtol=1e-12, err_msg=f"rank {r}")
    for j, (a, b) in enumerate(zip(params1[k], params0[k])):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12,
                                   err_msg=f"rank {r}: set_stage parameter {j}")
for k in range(STEPS):
    np.testing.assert_allclose(ys[k], ys0[k], rtol=1e-12, atol=1e-12, err_msg=f"rank {r}: y{k}")
    np.testing.assert_allclose(losses[k], losses0[k], rtol=1e-12, err_msg=f"rank {r}: loss")
    for j, (a, b) in enumerate(zip(params[k], params0[k])):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12,
                                   err_msg=f"rank {r}: step {k} parameter {j}")
assert losses[-1].sum() < losses[0].sum()
# each rank's Job: its own stage's variables, a recv (activation or gradient) and, on a stage's
# first rank, a send per rank of the other stage
job = g.full_job
mine, other = (P0, P1) if r in P0.flat_ranks else (P1, P0)
root = r == mine.flat_ranks[0]
names = {o.attrs["name"] for o in job.ops if o.op_type == "variable"
         and o.attrs["kind"] not in ("free", "train_step") and not o.attrs["name"].startswith("_")}
stage = "m.stage0" if mine == P0 else "m.stage1"
assert names and all(v.startswith(stage) for v in names), (r, sorted(names))
# (and the training step, broadcast on every rank of the graph: each rank counts)
assert [o.attrs["name"] for o in job.ops if o.attrs.get("kind") == "train_step"] == \
    ["System-Train-TrainStep"], r
assert g.state_dict()["System-Train-TrainStep"].to_local().numpy().tolist() == [g.call_count]
text = job.to_json()   # the Job and the Plan are data: the transfers' tags go through JSON
assert type(job).from_json(text).to_json() == text
assert "pipe_recv" in job.to_dot() and '"transfer"' in text
from actorflow.dispatch.lazy_global import boxing_report  # noqa: E402

report = boxing_report(job)   # what graph.debug(1) prints
want = [f"receive from rank {other.flat_ranks[0]}"]
want += [f"send to rank {p}" for p in other.flat_ranks] if root else []
assert all(any(w in line for line in report) for w in want), report
for j in (job, g1.full_job):
    kinds = sorted(o.op_type for o in j.ops if o.op_type.startswith("pipe_"))
    assert kinds == ["pipe_recv"] + ["pipe_send"] * (len(other.flat_ranks) if root else 0), (
        r, kinds)
if len(sys.argv) < 2 or sys.argv[1] != "vm":  # the Plan: send/recv tasks on the p2p thread
    from actorflow.compiler.task_id import describe_thread, thread_id_of

    plan_text = g.plan.to_json()
    assert type(g.plan).from_json(plan_text).to_json() == plan_text
    tasks = [t for t in g.plan.tasks if t.kind in ("send", "recv")]
    assert len(tasks) == len(kinds), (r, tasks)
    for t in tasks:
        assert "p2p" in describe_thread(thread_id_of(t.task_id)), describe_thread(
            thread_id_of(t.task_id))
        assert t.attrs["peer"] in other.flat_ranks
    if ACC > 1 and n == 2:  # the stages overlap: profiled send acts span from posting to completion
        from actorflow.process import groups

        x, t = flow.tensor(X, placement=P0, sbp=L), flow.tensor(T, placement=P1, sbp=L)
        with flow.profiler.profile() as prof:
            g(x, t)
            flow.synchronize()
        sends = sorted((e["start"], e["end"]) for e in prof.acts() if e["kind"] == "send")
        assert len(sends) == ACC, sends
        both = groups.allgather_object(sends, "pipeline acts")
        # rank 0 sent micro-batch 1 forward before rank 1 sent micro-batch 0's gradient back
        assert both[0][1][0] < both[1][0][0], both
flow.synchronize()
print(f"OK rank {r}", flush=True)
