"""Run under ``mpiexec -n 2``: a two-stage pipeline in an nn.Graph - stage 0 (a linear layer
and relu) placed on rank 0, stage 1 (a linear layer and the loss) on rank 1, the activation
moved between them with ``to_global(placement=...)`` in build - trains as one process: outputs,
losses and parameters after each SGD step. Each rank's Job holds only its stage's ops and its
send/recv; the Plan runs them as send/recv tasks on the p2p thread. argv[1]: "vm" for the
reference executor; argv[2]: gradient accumulation steps (micro-batches flow through the stages
concurrently: rank 0 sends micro-batch 1's activation before rank 1 sends micro-batch 0's
gradient back). Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r = flow.env.get_rank()
P0, P1 = flow.placement("cpu", [0]), flow.placement("cpu", [1])
B = flow.sbp.broadcast
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
            h = h.to_global(placement=P1, sbp=B)   # stage 0 -> stage 1
        y = self.m.stage1(h)
        loss = ((y - t) ** 2).sum()
        loss.backward()
        return y, loss


def run(pipe: bool):
    m = make(pipe)
    x, t = flow.tensor(X), flow.tensor(T)
    if pipe:
        x, t = flow.tensor(X, placement=P0, sbp=B), flow.tensor(T, placement=P1, sbp=B)
    g = Train(m, pipe)
    ys, losses, params = [], [], []
    for _ in range(STEPS):
        y, loss = g(x, t)
        ys.append(y.numpy())
        losses.append(loss.numpy())
        params.append([p.numpy().copy() for p in m.parameters()])
    return ys, losses, params, g


ys0, losses0, params0, _ = run(False)
ys1, losses1, params1, g1 = run("set_stage")
ys, losses, params, g = run(True)
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
# each rank's Job: its own stage's variables, and a send and a recv (activation / gradient)
job = g.full_job
names = {o.attrs["name"] for o in job.ops if o.op_type == "variable" and o.attrs["kind"] != "free"
         and not o.attrs["name"].startswith("_")}
mine = "m.stage0" if r == 0 else "m.stage1"
assert names and all(n.startswith(mine) for n in names), (r, sorted(names))
text = job.to_json()   # the Job and the Plan are data: the transfers' tags go through JSON
assert type(job).from_json(text).to_json() == text
assert "pipe_send" in job.to_dot() and '"transfer"' in text
from actorflow.dispatch.lazy_global import boxing_report  # noqa: E402

report = boxing_report(job)   # what graph.debug(1) prints
want = ["send to rank 1", "receive from rank 1"] if r == 0 else ["receive from rank 0",
                                                                   "send to rank 0"]
assert all(any(w in line for line in report) for w in want), report
for j in (job, g1.full_job):
    kinds = sorted(o.op_type for o in j.ops if o.op_type.startswith("pipe_"))
    assert kinds == ["pipe_recv", "pipe_send"], (r, kinds)
if len(sys.argv) < 2 or sys.argv[1] != "vm":  # the Plan: send/recv tasks on the p2p thread
    from actorflow.compiler.task_id import describe_thread, thread_id_of

    plan_text = g.plan.to_json()
    assert type(g.plan).from_json(plan_text).to_json() == plan_text
    tasks = {t.kind: t for t in g.plan.tasks if t.kind in ("send", "recv")}
    assert sorted(tasks) == ["recv", "send"], (r, sorted(tasks))
    for t in tasks.values():
        assert "p2p" in describe_thread(thread_id_of(t.task_id)), describe_thread(
            thread_id_of(t.task_id))
        assert t.attrs["peer"] == 1 - r
    if ACC > 1:  # the stages overlap: profiled send acts span from posting to completion
        from actorflow.distributed import groups

        x, t = flow.tensor(X, placement=P0, sbp=B), flow.tensor(T, placement=P1, sbp=B)
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
