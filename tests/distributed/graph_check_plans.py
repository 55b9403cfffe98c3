"""Run under ``mpiexec -n N``: ``check_plans`` on a data-parallel graph finds nothing wrong (the
summaries gathered over MPI list the gradients' all-reduces with their bytes); the same
summaries with rank 1's first two collectives swapped, or one dropped, are reported naming
the ops. Prints ``OK rank R``."""
import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.process import groups

r, n = flow.env.get_rank(), flow.env.get_world_size()
PL = flow.placement.all("cpu")
flow.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
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


rng = np.random.default_rng(0)
x = flow.tensor(rng.standard_normal((4 * n, 6)).astype(np.float32), placement=PL,
                sbp=flow.sbp.split(0))
y = flow.tensor(rng.integers(0, 3, 4 * n), placement=PL, sbp=flow.sbp.split(0))
g = Train()
g(x, y)
assert flow.distributed.check_plans(g, world_size=n) == []
with pytest.raises(ValueError, match=f"world_size={n + 1} but {n} process"):
    flow.distributed.check_plans(g, world_size=n + 1)

mine = flow.distributed.plan_summary(g.plan)
coll = mine["collectives"]
assert mine["rank"] == r and len(coll) >= 4, mine
assert "boxing_p_to_b" in {c["op_type"] for c in coll}, coll
w0 = [c for c in coll if c["reason"] == "model.0.weight grad"]
assert len(w0) == 1 and w0[0]["bytes"] == 8 * 6 * 4 and w0[0]["shape"] == (8, 6), coll
assert all(c["group"] == coll[0]["group"] for c in coll), coll

every = groups.allgather_object(mine, "test: gather summaries")
swapped = [dict(s) for s in every]
c1 = list(every[1]["collectives"])
c1[0], c1[1] = c1[1], c1[0]
swapped[1]["collectives"] = c1
problems = flow.distributed.compare_plans(swapped)
a, b = every[0]["collectives"][0]["op"], every[0]["collectives"][1]["op"]
assert len(problems) == 2, problems
kind = every[0]["collectives"][0]["op_type"]
assert f"collective #0: rank 0 issues {kind} {a!r}" in problems[0], problems
assert f"but rank 1 issues {every[0]['collectives'][1]['op_type']} {b!r}" in problems[0], problems
assert "they differ in shape" in problems[0], problems
dropped = [dict(s) for s in every]
dropped[1]["collectives"] = every[1]["collectives"][:-1]
problems = flow.distributed.compare_plans(dropped)
last = every[0]["collectives"][-1]["op"]
assert len(problems) == 1 and repr(last) in problems[0], problems
assert "would wait forever" in problems[0], problems
g.close()
flow.synchronize()
print(f"OK rank {r}", flush=True)
