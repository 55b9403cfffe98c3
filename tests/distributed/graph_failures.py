"""Run under ``mpiexec -n 2`` with a mode argument: an nn.Graph whose kernel fails on rank 1
only (an embedding index out of range in rank 1's shard), while rank 0 waits in the graph's
all-reduce. ``raise``: rank 1 reads the failed output (the error is uncaught); ``caught``: rank 1
catches it and stays alive without joining. Either way every rank must exit non-zero in
bounded time (the exception hook or the watchdog aborts the job), naming the op and rank.
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


idx = flow.tensor([0, 1, 9, 2], placement=PL, sbp=flow.sbp.split(0))   # 9: on rank 1
g = G()
if mode == "caught" and r == 1:
    try:   # the error comes at the call (blocking mode) or at the first read of the output
        g(idx).numpy()
    except Exception as e:   # noqa: BLE001  (the test wants rank 1 alive after the error)
        print(f"rank 1 caught: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
    time.sleep(90)
out = g(idx)
print(f"rank {r} finished: {out.numpy()}", flush=True)
