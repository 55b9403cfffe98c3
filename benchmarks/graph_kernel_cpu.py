"""Kernel CPU per op and step times, eager against nn.Graph variants, taking turns in one process.

    python benchmarks/graph_kernel_cpu.py [--quick] [--model mlp|cnn|gpt|all] [--rounds R]

The models and steps are ``graph_profile.py``'s (issue #17). Every registered CPU kernel is
wrapped with ``time.thread_time`` (the outermost kernel only: a fused op's inner kernels count
for the fused op), so a kernel's figure is the CPU its thread spent in it, not wall time a
loaded machine stretches or the GIL holds up (eager's kernel spans in ``graph_profile`` include
waits for the caller's Python). The variants run round by round in turn: eager (async VM), the
default graph, the graph with two compute lanes (``ACTORFLOW_GRAPH_COMPUTE_LANES=2``) and the
graph with ``config.allow_fuse_add_to_output()``. It prints per variant the fastest round's
kernel CPU per op (ms per step), and the step wall and process CPU times (fastest and median
round) with the median over rounds of the wall ratio to eager's round next to it.

Run it with ``OPENBLAS_NUM_THREADS=1 ACTORFLOW_INTRA_OP_THREADS=1`` for figures a shared machine
disturbs least, and without them for the default BLAS threads.
"""
from __future__ import annotations

import collections
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from actorflow.ops import registry  # noqa: E402
from benchmarks import graph_profile as gp  # noqa: E402
from benchmarks.common import env, quick_parser, table, versions  # noqa: E402

_acc: dict = collections.defaultdict(float)
_local = threading.local()
_recording = [False]


def _timed(name: str, fn):
    def kernel(ins, outs, attrs):
        if not _recording[0] or getattr(_local, "inside", False):
            return fn(ins, outs, attrs)
        _local.inside = True
        t0 = time.thread_time()
        try:
            return fn(ins, outs, attrs)
        finally:
            _acc[name] += time.thread_time() - t0
            _local.inside = False
    return kernel


def instrument() -> None:
    """Wrap every registered CPU kernel with the thread-CPU timer (once per process)."""
    for name, op in registry.all_ops().items():
        if op.kernel_cpu is not None and not getattr(op.kernel_cpu, "_cpu_timed", False):
            op.kernel_cpu = _timed(name, op.kernel_cpu)
            op.kernel_cpu._cpu_timed = True
            op.kernels["cpu"] = op.kernel_cpu


GRAPHS = (("graph", "1", False), ("graph 2 lanes", "2", False), ("graph add_to_output", "1", True))


def variants(build, graphs: tuple = GRAPHS) -> dict:
    """name -> step function: eager, then each of ``graphs`` ((name, compute lanes, fuse
    add_to_output)), a fresh copy of the model compiled under those options."""
    out = {"eager": gp.make_eager(build)[3]}
    for name, lanes, a2o in graphs:
        g, step = gp.make_graph(build)
        g.config.allow_fuse_add_to_output(a2o)
        with env("ACTORFLOW_GRAPH_COMPUTE_LANES", lanes):
            step().item()  # compiles under these options
        out[name] = step
    return out


def measure(steps: dict, rounds: int, n: int) -> tuple:
    """(kernel CPU per op, wall per round, process CPU per round) of each variant, in seconds
    per step; kernel figures are each op's fastest round."""
    for _ in range(2):
        for s in steps.values():
            s().item()
    kern = {k: {} for k in steps}
    wall = {k: [] for k in steps}
    cpu = {k: [] for k in steps}
    for _ in range(rounds):
        for k, s in steps.items():
            flow.synchronize()
            _acc.clear()
            _recording[0] = True
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                s().item()
            flow.synchronize()
            wall[k].append((time.perf_counter() - t0) / n)
            cpu[k].append((time.process_time() - c0) / n)
            _recording[0] = False
            per = dict(_acc)
            per["all kernels"] = sum(per.values())
            for op, t in per.items():
                kern[k][op] = min(kern[k].get(op, float("inf")), t / n)
    return kern, wall, cpu


def report(name: str, build, rounds: int, n: int) -> str:
    steps = variants(build)
    kern, wall, cpu = measure(steps, rounds, n)
    names = list(steps)
    ops = sorted({o for k in names for o in kern[k]}, key=lambda o: -kern["graph"].get(o, 0.0))
    rows = [(o, *(f"{kern[k].get(o, 0.0) * 1e3:.2f}" for k in names)) for o in ops]
    e = wall["eager"]
    srows = []
    for k in names:
        ratio = statistics.median(w / x for w, x in zip(wall[k], e))
        srows.append((k, f"{min(wall[k]) * 1e3:.1f} / {statistics.median(wall[k]) * 1e3:.1f}",
                      f"{min(cpu[k]) * 1e3:.1f} / {statistics.median(cpu[k]) * 1e3:.1f}",
                      f"{ratio:.2f}x"))
    return "\n".join([
        f"## {name}", "", "kernel CPU ms per step (fastest round):", "",
        table(rows, ["op", *names]), "",
        table(srows, ["variant", "wall ms (min / median)", "process CPU ms (min / median)",
                      "wall / eager (median)"]), ""])


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=[*gp.MODELS, "all"], default="all")
    p.add_argument("--rounds", type=int, default=0, help="rounds (default 4 quick, 8)")
    args = p.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 8)
    n = 3 if args.quick else 5
    instrument()
    print(versions())
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, "
          f"{rounds} rounds of {n} steps per variant\n")
    for key in (gp.MODELS if args.model == "all" else [args.model]):
        label, build = gp.MODELS[key]
        print(report(label, build, rounds, n))


if __name__ == "__main__":
    main()
