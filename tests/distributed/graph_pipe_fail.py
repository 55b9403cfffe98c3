"""Run under ``mpiexec -n 2``: after one good step of a two-stage pipeline graph, rank 1 fails
before its second call and carries on (it catches the error), so rank 0's receive of the
gradient never completes: the watchdog must end
every rank within ``ACTORFLOW_COMM_TIMEOUT``, naming the transfer. argv[1]: "vm" for the
reference executor (blocking transfers in Job order)."""
import os
import sys
import time

import numpy as np

import actorflow as flow
import actorflow.nn as nn

if len(sys.argv) > 1 and sys.argv[1] == "vm":
    os.environ["ACTORFLOW_RUN_GRAPH_BY_VM"] = "1"
r = flow.env.get_rank()
P0, P1 = flow.placement("cpu", [0]), flow.placement("cpu", [1])
B = flow.sbp.broadcast
fc0, fc1 = nn.Linear(4, 4), nn.Linear(4, 2)
fc0.to_global(placement=P0, sbp=B)
fc1.to_global(placement=P1, sbp=B)


class G(nn.Graph):
    def __init__(self):
        super().__init__()
        self.fc0, self.fc1 = fc0, fc1
        self.add_optimizer(flow.optim.SGD([*fc0.parameters(), *fc1.parameters()], lr=0.1))

    def build(self, x):
        loss = self.fc1(self.fc0(x).to_global(placement=P1, sbp=B)).sum()
        loss.backward()
        return loss


x = flow.tensor(np.ones((3, 4), np.float32), placement=P0, sbp=B)
g = G()
g(x).numpy()
print(f"STEP1 rank {r}", flush=True)
if r == 1:
    try:
        raise RuntimeError("stage 1 failed")
    except RuntimeError:
        time.sleep(60)   # carries on elsewhere: never posts its receive
        sys.exit(0)
g(x)
flow.synchronize()
print("UNREACHABLE rank 0", flush=True)
