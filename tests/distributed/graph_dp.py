"""Run under ``mpiexec -n N``: a data-parallel MLP trained in an nn.Graph (parameters
broadcast, the batch split along dim 0, SGD with momentum) gives the same losses and
parameters as one process on the full batch (eager and in a local Graph) and as the same
global model trained eagerly; on both graph executors (argv[1]: "vm" for the reference
executor). The weight gradients are all-reduced before the update. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.dispatch.lazy_global import boxing_report
from tests.distributed.dp_train import train_four_ways

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
rng = np.random.default_rng(11)
N, D, H, C = 4 * n + 2, 6, 8, 4
X = rng.standard_normal((N, D))
Y = rng.integers(0, C, size=N)
STEPS = 4


def make_model(glob: bool):
    flow.manual_seed(5)
    m = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, C)).to(flow.float64)
    if glob:
        m.to_global(placement=PL, sbp=B)
    return m


runs = train_four_ways(make_model, X, Y, lr=0.1, steps=STEPS)
g = runs["global graph"][2]
# data parallelism fell out of the sbp: each parameter's gradient is all-reduced once
boxing = [o for o in g.full_job.ops if "boxing" in o.tags]
reduces = [o for o in boxing if o.op_type == "boxing_p_to_b"]
report = "\n".join(boxing_report(g.full_job))
assert reduces, report
assert all(o.tags["boxing"]["reason"] in {f"model.{k}.{w} grad" for k in (0, 2)
                                          for w in ("weight", "bias")} for o in reduces), report
assert "model.0.weight grad: P -> B all-reduce, 384 B" in report, report
if os.environ.get("ACTORFLOW_RUN_GRAPH_BY_VM") != "1":
    threads = {t.task_id >> 24 for t in g.plan.tasks if t.kind == "collective"}
    assert len(threads) == 1, threads
    coll = [t for t in g.plan.tasks if t.kind == "collective"]
    assert {t.op_type for t in coll} >= {"boxing_p_to_b"}, coll
    # numbered in Job order, one sequence on the comm thread
    assert [t.attrs["collective_seq"] for t in coll] == list(range(len(coll)))
    assert all(t.attrs["collective_count"] == len(coll) for t in coll)
flow.synchronize()
print(f"OK rank {r}", flush=True)
