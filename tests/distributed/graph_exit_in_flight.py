"""Rank script: a data-parallel graph whose calls are still in flight when the script ends
(no synchronize, no read of the loss). Every rank must exit 0 at once: no rank waits in the
last call's collective for a peer that already finalized MPI (``watchdog.exit_barrier``)."""
import actorflow as flow
import actorflow.nn as nn

P = flow.placement("cpu", ranks=[0, 1])
flow.manual_seed(0)
m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
m.to_global(P, flow.sbp.broadcast)
opt = flow.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)


class TrainGraph(nn.Graph):
    def __init__(self):
        super().__init__()
        self.m = m
        self.add_optimizer(opt)

    def build(self, x):
        loss = self.m(x).sum()
        loss.backward()
        return loss


g = TrainGraph()
x = flow.randn(16, 64).to_global(P, flow.sbp.split(0))
for _ in range(3):
    g(x)
print(f"LEAVING rank {flow.env.get_rank()}", flush=True)
