"""The cost of a distributed graph's collective waits (issue #15: non-blocking MPI polled by
``watchdog.wait``): milliseconds per call of a 2-rank data-parallel nn.Graph.

    mpiexec -n 2 python benchmarks/bench_graph_wait.py [--quick]

Two graphs on the actor runtime: a training step of a small MLP 64-128-8 (batch 64 split(0),
SGD; four parameter all-reduces per step) and a graph that is one tiny all-reduce (the sum of
a split tensor, to broadcast). Each round runs ``steps`` calls and reads the last output; the
figure is the fastest round (the machine is shared: the fastest is the least disturbed).
Compare two checkouts by running this with each on ``PYTHONPATH``.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
import actorflow.nn as nn  # noqa: E402
from benchmarks.common import quick_parser  # noqa: E402

PL = flow.placement("cpu", ranks=[0, 1])
B, S0 = flow.sbp.broadcast, flow.sbp.split(0)


class Train(nn.Graph):
    def __init__(self, m):
        super().__init__()
        self.m = m
        self.add_optimizer(flow.optim.SGD(m.parameters(), lr=0.01))

    def build(self, x, y):
        loss = ((self.m(x) - y) ** 2).mean()
        loss.backward()
        return loss


class AllReduce(nn.Graph):
    def build(self, x):
        return x.sum().to_global(sbp=B)


def fastest_round(fn, steps: int, rounds: int) -> float:
    """Milliseconds per call of ``fn`` in the fastest of ``rounds`` rounds of ``steps``."""
    out = []
    for _ in range(rounds):
        flow.comm.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            v = fn()
        v.numpy()
        out.append((time.perf_counter() - t0) / steps * 1e3)
    return float(np.min(out))


def main() -> None:
    args = quick_parser(__doc__.split("\n\n")[0]).parse_args()
    if flow.env.get_world_size() != 2:
        raise SystemExit("run under mpiexec -n 2")
    flow.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
    m.to_global(placement=PL, sbp=B)
    x = flow.randn(64, 64).to_global(placement=PL, sbp=B).to_global(sbp=S0)
    y = flow.randn(64, 8).to_global(placement=PL, sbp=B).to_global(sbp=S0)
    xa = flow.ones(16, 4).to_global(placement=PL, sbp=B).to_global(sbp=S0)
    g, a = Train(m), AllReduce()
    for _ in range(3):
        g(x, y).numpy()
        a(xa).numpy()
    rounds = 5 if args.quick else 9
    t = fastest_round(lambda: g(x, y), 50, rounds)
    u = fastest_round(lambda: a(xa), 200, rounds)
    if flow.env.get_rank() == 0:
        print(f"MLP DP step {t:.3f} ms; one tiny all-reduce graph {u:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
