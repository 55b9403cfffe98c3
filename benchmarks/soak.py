"""Soak run (not a test): does a long session keep its memory and threads flat?

    .venv/bin/python benchmarks/soak.py [--quick]

(1) 10,000 steps of a training graph (an MLP 64-256-256-10, batch 64, cross-entropy, Adam) on
the actor runtime; the loss is read (a sync point) only at each sample, so calls pipeline as in
a training loop that logs every few hundred steps;
(2) 1,000 cycles of creating a graph (a fresh Linear 64-64 + ReLU inference graph), running it
and deleting it;
(3) unread results: 5,000 calls of an inference graph (Linear 1024-1024 on a 256 x 1024 batch:
1 MiB out per call) whose outputs are never read, then 3,000 unread eager ops on a 4 MiB
tensor (``y = x * 2``); it reports the peak RSS during each loop (sampled every 50 calls) and
the most instructions queued on the worker. Back-pressure (count and bytes, graph calls
included) must keep both bounded whatever the loop does: without it the queue grows with the
loop (issue 25 measured 13.5 GB and 8 GB).

Every N steps (cycles) it prints the process's resident memory (``VmRSS`` from
``/proc/self/status``), the thread count and the number of Python objects the collector
tracks, then says whether RSS is flat after warm-up (every sample after the first tenth of the
run within 5 MB of each other) and whether the thread count is back to its baseline at the end.
The object count rises by one per graph call (or eager op) until the VM worker's record of its
last 4,096 queued instructions is full (each holds no more than its name, flags and error).
``--quick``: a tenth of the steps and cycles.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402

nn = flow.nn
FLAT_MB = 5.0


def rss_mb() -> float:
    """Resident set size of this process in MiB (``VmRSS``; 0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def sample(i: int, t0: float, extra: str = "") -> list:
    flow.synchronize()
    return [i, f"{rss_mb():.1f}", threading.active_count(), len(gc.get_objects()),
            f"{time.perf_counter() - t0:.1f}", extra]


class TrainStep(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


class Infer(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


def training_steps(steps: int, every: int) -> list:
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    opt = flow.optim.Adam(model.parameters(), lr=1e-3)
    g = TrainStep(model, opt)
    rng = np.random.default_rng(0)
    batches = [(flow.tensor(rng.standard_normal((64, 64)).astype(np.float32)),
                flow.tensor(rng.integers(0, 10, 64))) for _ in range(16)]
    t0 = time.perf_counter()
    rows = []
    for i in range(1, steps + 1):
        x, y = batches[i % len(batches)]
        loss = g(x, y)
        if i % every == 0:
            rows.append(sample(i, t0, f"loss {loss.item():.3f}"))
    g.close()
    del g, loss
    return rows


def graph_cycles(cycles: int, every: int) -> list:
    x = flow.randn(8, 64)
    t0 = time.perf_counter()
    rows = []
    for i in range(1, cycles + 1):
        g = Infer(nn.Sequential(nn.Linear(64, 64), nn.ReLU()))
        out = g(x).numpy()
        del g
        if i % every == 0:
            rows.append(sample(i, t0, f"out[0,0] {out[0, 0]:.3f}"))
    return rows


def unread_loops(graph_calls: int, eager_ops: int) -> list:
    """Rows (what, iterations, RSS before, peak RSS during, RSS after synchronize, most queued)
    for a loop of unread graph calls and one of unread eager ops."""
    w = flow.vm.current_worker()
    rows = []

    def run(what, n, body):
        flow.synchronize()
        gc.collect()
        before = rss_mb()
        peak, queued = before, 0
        t0 = time.perf_counter()
        for i in range(n):
            body()
            if i % 50 == 0:
                peak = max(peak, rss_mb())
                queued = max(queued, len(w.pending))
        seconds = time.perf_counter() - t0
        peak = max(peak, rss_mb())
        flow.synchronize()
        rows.append([what, n, f"{before:.1f}", f"{peak:.1f}", f"{rss_mb():.1f}", queued,
                     f"{seconds:.1f}"])

    flow.manual_seed(0)
    g = Infer(nn.Linear(1024, 1024))
    x = flow.randn(256, 1024)
    g(x).numpy()
    run("graph calls, unread (1 MiB out)", graph_calls, lambda: g(x))
    g.close()
    a = flow.randn(1024, 1024)  # 4 MiB
    run("eager x * 2, unread (4 MiB out)", eager_ops, lambda: a * 2)
    return rows


def verdict(rows: list, total: int, baseline: int, what: str) -> str:
    steady = [float(r[1]) for r in rows if r[0] > total // 10]
    spread = max(steady) - min(steady)
    flat = "flat" if spread <= FLAT_MB else "NOT flat"
    gc.collect()
    end = threading.active_count()
    back = "back to the baseline" if end == baseline else "NOT back to the baseline"
    return (f"{what}: RSS after warm-up {min(steady):.1f}..{max(steady):.1f} MB, spread "
            f"{spread:.1f} MB: {flat} (within {FLAT_MB:.0f} MB); threads baseline {baseline}, "
            f"end {end}: {back}")


def main(argv=None) -> None:
    args = quick_parser(__doc__.splitlines()[0]).parse_args(argv)
    scale = 10 if args.quick else 1
    steps, cycles = 10_000 // scale, 1_000 // scale
    print(versions())
    (flow.ones(1 << 16) + 1).numpy()  # a queued op: the VM worker starts before the baseline
    gc.collect()
    baseline = threading.active_count()
    headers = ["step", "RSS MB", "threads", "gc objects", "seconds", ""]
    train = training_steps(steps, max(1, steps // 20))
    print(f"(1) {steps} training-graph steps (MLP 64-256-256-10, b64, Adam), sampled every "
          f"{max(1, steps // 20)}:\n")
    print(table(train, headers))
    print()
    first = verdict(train, steps, baseline, "(1) training steps")
    cyc = graph_cycles(cycles, max(1, cycles // 20))
    print(f"(2) {cycles} graph create/run/delete cycles (Linear 64-64 + ReLU), sampled every "
          f"{max(1, cycles // 20)}:\n")
    print(table(cyc, ["cycle"] + headers[1:]))
    print()
    print(first)
    print(verdict(cyc, cycles, baseline, "(2) graph cycles"))
    limit = flow.vm.scheduler.MAX_QUEUED_BYTES / 2**20
    unread = unread_loops(5_000 // scale, 3_000 // scale)
    print(f"\n(3) unread results (back-pressure: {flow.vm.scheduler.MAX_QUEUED} instructions, "
          f"{limit:.0f} MiB queued per worker):\n")
    print(table(unread, ["loop", "iterations", "RSS before MB", "peak RSS MB",
                         "after sync MB", "most queued", "seconds"]))


if __name__ == "__main__":
    main()
