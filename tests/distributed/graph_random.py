"""Run under ``mpiexec -n 2``: a random op in a distributed nn.Graph (dropout of a broadcast
tensor) draws the same values on every rank even when the ranks' generators differ: the
graph's seeds are rank 0's, as eager-global random ops' are. Prints ``OK rank R``."""
import numpy as np

import actorflow as flow
import actorflow.nn as nn
from actorflow.process import groups

r = flow.env.get_rank()
PL = flow.placement.all("cpu")
flow.manual_seed(100 + r)   # a different generator on each rank


class G(nn.Graph):
    def build(self, x):
        return nn.functional.dropout(x, 0.5, training=True)


x = flow.tensor(np.ones((6, 4)), placement=PL, sbp=flow.sbp.broadcast)
g = G()
seen = []
for _ in range(2):
    y = g(x)
    assert y.sbp == (flow.sbp.broadcast,), y.sbp
    mine = y.to_local().numpy()
    shards = groups.allgather_object(mine, "dropout values")
    assert all(np.array_equal(s, shards[0]) for s in shards), f"rank {r}: ranks disagree"
    assert (mine == 0).any() and (mine == 2).any(), mine
    seen.append(mine)
assert not np.array_equal(seen[0], seen[1])   # a new mask each call
flow.synchronize()
print(f"OK rank {r}", flush=True)
