"""Run under ``mpiexec -n 2`` with a mode and an executor ("actors" or "vm": the reference
executor, blocking transfers in Job order): a two-stage pipeline graph (stage 0 on rank 0,
stage 1 on rank 1) after one good step.

* ``kernel``: stage 1's embedding gets an index out of range in the second call, so rank 1's
  kernel fails while rank 0 waits to receive the gradient: rank 0's call raises too
  (``RemoteRankError`` naming rank 1, the op and its module), both ranks catch and exit 0.
* ``silent``: rank 1 catches an error of its own and never calls again (no failure notice), so
  rank 0's receive of the gradient never completes: it raises at ``ACTORFLOW_COMM_TIMEOUT``,
  naming the transfer, uncaught (the job ends non-zero)."""
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
P0, P1 = flow.placement("cpu", [0]), flow.placement("cpu", [1])
B = flow.sbp.broadcast
fc0, fc1, emb = nn.Linear(4, 4), nn.Linear(4, 2), nn.Embedding(3, 2)
fc0.to_global(placement=P0, sbp=B)
fc1.to_global(placement=P1, sbp=B)
emb.to_global(placement=P1, sbp=B)


class G(nn.Graph):
    def __init__(self):
        super().__init__()
        self.fc0, self.fc1, self.emb = fc0, fc1, emb
        self.add_optimizer(flow.optim.SGD([*fc0.parameters(), *fc1.parameters()], lr=0.1))

    def build(self, x, idx):
        h = self.fc0(x).to_global(placement=P1, sbp=B)
        # the gradient rank 1 sends back depends on the embedding's value (through the square):
        # when the embedding fails, rank 0's receive of that gradient is left pending
        loss = (self.fc1(h + self.emb(idx).sum()) ** 2).sum()
        loss.backward()
        return loss


x = flow.tensor(np.ones((3, 4), np.float32), placement=P0, sbp=B)
good = flow.tensor([0, 1], placement=P1, sbp=B)
bad = flow.tensor([0, 9], placement=P1, sbp=B)
g = G()
g(x, good).numpy()
print(f"STEP1 rank {r}", flush=True)
if mode == "silent":
    if r == 1:
        try:
            raise RuntimeError("stage 1 failed")
        except RuntimeError:
            time.sleep(60)   # carries on elsewhere: never posts its receive
            sys.exit(0)
    g(x, good)
    flow.synchronize()
    print("UNREACHABLE rank 0", flush=True)
t0 = time.monotonic()
try:
    g(x, bad)
    flow.synchronize()   # (rank 0 does not read the loss: that would wait for rank 1)
    print(f"UNREACHABLE rank {r}", flush=True)
except Exception as e:   # noqa: BLE001  (the test reads what each rank raised)
    print(f"rank {r} raised after {time.monotonic() - t0:.2f} s: {type(e).__name__}: "
          f"{str(e).splitlines()[0]}", flush=True)
print(f"rank {r} exits", flush=True)
