"""Run under ``mpiexec -n 2``: each rank profiles a data-parallel graph and writes its own
Chrome trace into argv[1] (``trace.rank<r>.json``); the Plan states this rank on every task and
in its summary. The test merges the files (``python -m actorflow.profiler.merge``) and checks
the ranks' tracks. Rank 1 starts profiling later, so only aligned clocks make the ranks' matching
all-reduces overlap. Prints ``OK rank R``."""
import json
import os
import sys
import time

import numpy as np

import actorflow as flow
import actorflow.nn as nn

r, n = flow.env.get_rank(), flow.env.get_world_size()
out_dir = sys.argv[1]
PL = flow.placement.all("cpu")
rng = np.random.default_rng(3)
X, Y = rng.standard_normal((4 * n, 6)), rng.integers(0, 3, size=4 * n)
flow.manual_seed(1)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(flow.float64)
model.to_global(placement=PL, sbp=flow.sbp.broadcast)
opt = flow.optim.SGD(model.parameters(), lr=0.1)


class Train(nn.Graph):
    def __init__(self):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


g = Train()
x = flow.tensor(X, placement=PL, sbp=flow.sbp.split(0))
y = flow.tensor(Y, placement=PL, sbp=flow.sbp.split(0))
g(x, y).numpy()

# 1. the Plan is this rank's, and each task says where it runs
plan = g.plan
assert (plan.rank, plan.world_size) == (r, n), (plan.rank, plan.world_size)
assert f"of rank {r} (one of {n} ranks' Plans)" in plan.summary(), plan.summary()
tasks = json.loads(plan.to_json())["tasks"]
assert all(t["rank"] == r and t["device"] == "cpu:0" for t in tasks), tasks[0]
coll = [t for t in tasks if t["kind"] == "collective"]
assert coll and all(t["stream"] == "comm" and t["thread"] == f"rank{r}/cpu:0/comm"
                    for t in coll), coll
assert f"rank {r} cpu:0 comm" in plan.to_dot()

# 2. one trace per rank
if r == 1:
    time.sleep(0.3)
with flow.profiler.profile() as prof:
    for _ in range(3):
        loss = g(x, y)
    loss.numpy()
    flow.synchronize()
path = prof.export_chrome_trace(os.path.join(out_dir, "trace.json"))
assert path == os.path.join(out_dir, f"trace.rank{r}.json"), path
with open(path) as f:
    trace = json.load(f)
assert trace["otherData"]["rank"] == r and trace["otherData"]["world_size"] == n
procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
         if e["ph"] == "M" and e["name"] == "process_name"}
assert procs[2 * r] == f"actorflow rank {r}", procs
names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
         if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 2 * r}
colls = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "collective"]
assert len(colls) == 3 * len(coll), (len(colls), len(coll))
assert {names[e["tid"]] for e in colls} == {f"actorflow-rank{r}/cpu:0/comm"}, names
flow.comm.barrier()
print(f"OK rank {r}", flush=True)
