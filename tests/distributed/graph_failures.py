"""Run under ``mpiexec -n 2`` with a mode argument: an nn.Graph whose kernel fails on rank 1
only (an embedding index out of range in rank 1's shard), while rank 0 waits in the graph's
all-reduce. Rank 1's failure notice makes rank 0's call raise too (``RemoteRankError``).

* ``caught``: both ranks catch the error and print it with the seconds it took; a second call
  of that graph is refused on both ranks (its all-reduce is left pending on rank 0), and a new
  graph runs a good call on both; both exit 0.
* ``raise``: rank 1 lets its error go uncaught (its exception hook aborts the job).
* ``raise0``: rank 0 lets its (remote) error go uncaught; rank 1 catches its own and waits.

argv[2] "vm": on the reference executor."""
import os
import sys
import time

import numpy as np

import actorflow as flow
import actorflow.nn as nn

mode = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r = flow.env.get_rank()
PL = flow.placement("cpu", ranks=[0, 1])
weight = nn.Parameter(flow.tensor(np.ones((3, 2)), placement=PL, sbp=flow.sbp.broadcast))


class G(nn.Graph):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(3, 2).to(flow.float64)
        self.emb.weight = weight

    def build(self, idx):
        return self.emb(idx).sum().to_global(sbp=flow.sbp.broadcast)


bad = flow.tensor([0, 1, 9, 2], placement=PL, sbp=flow.sbp.split(0))   # 9: on rank 1
good = flow.tensor([0, 1, 2, 2], placement=PL, sbp=flow.sbp.split(0))
g = G()
g(good).numpy()   # compiled, and one good call
t0 = time.monotonic()
if mode == "raise" and r == 1 or mode == "raise0" and r == 0:
    g(bad).numpy()   # uncaught
    print(f"rank {r} UNREACHABLE", flush=True)
try:   # the error comes at the call (blocking mode) or at the first read of the output
    g(bad).numpy()
    print(f"rank {r} UNREACHABLE", flush=True)
except Exception as e:   # noqa: BLE001  (the test reads what each rank raised)
    print(f"rank {r} raised after {time.monotonic() - t0:.2f} s: {type(e).__name__}: "
          f"{str(e).splitlines()[0]}", flush=True)
if mode == "raise0":
    time.sleep(60)   # rank 1: rank 0's exception hook ends the job
try:
    g(good).numpy()
    print(f"rank {r} UNREACHABLE", flush=True)
except Exception as e:   # noqa: BLE001
    print(f"rank {r} second call: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
out = G()(good).numpy()   # a new graph: new communicators
print(f"rank {r} finished: {out}", flush=True)
