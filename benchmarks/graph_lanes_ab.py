"""Eager against the graph on one and on two compute lanes, taking turns in one process.

    python benchmarks/graph_lanes_ab.py [--quick] [--model mlp|cnn|gpt|all] [--rounds R]

The models and steps are ``graph_profile.py``'s (issue #17); no kernel timers. Each round runs
``n`` steps of every variant in turn (eager on the async VM, the graph compiled with
``ACTORFLOW_GRAPH_COMPUTE_LANES=1`` and with ``=2``), and the table gives per variant the
fastest and median round's wall and process CPU ms per step and the median over rounds of the
wall ratio to eager's round and to the one-lane graph's round. Run it with and without
``OPENBLAS_NUM_THREADS=1`` (two lanes each running multi-threaded GEMMs oversubscribe the
cores).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks import graph_kernel_cpu as kcpu, graph_profile as gp  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402


def report(label: str, build, rounds: int, n: int) -> str:
    steps = kcpu.variants(build, (("graph 1 lane", "1", False), ("graph 2 lanes", "2", False)))
    for _ in range(2):
        for s in steps.values():
            s().item()
    wall = {k: [] for k in steps}
    cpu = {k: [] for k in steps}
    for _ in range(rounds):
        for k, s in steps.items():
            flow.synchronize()
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                s().item()
            flow.synchronize()
            wall[k].append((time.perf_counter() - t0) / n)
            cpu[k].append((time.process_time() - c0) / n)
    rows = []
    for k in steps:
        r_e = statistics.median(w / e for w, e in zip(wall[k], wall["eager"]))
        r_1 = statistics.median(w / e for w, e in zip(wall[k], wall["graph 1 lane"]))
        rows.append((k, f"{min(wall[k]) * 1e3:.1f} / {statistics.median(wall[k]) * 1e3:.1f}",
                     f"{min(cpu[k]) * 1e3:.1f} / {statistics.median(cpu[k]) * 1e3:.1f}",
                     f"{r_e:.2f}x", f"{r_1:.2f}x"))
    return "\n".join([f"## {label}", "", table(rows, [
        "variant", "wall ms (min / median)", "process CPU ms (min / median)",
        "wall / eager (median)", "wall / 1 lane (median)"]), ""])


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=[*gp.MODELS, "all"], default="all")
    p.add_argument("--rounds", type=int, default=0, help="rounds (default 6 quick, 12)")
    args = p.parse_args(argv)
    rounds = args.rounds or (6 if args.quick else 12)
    n = 3 if args.quick else 5
    print(versions())
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, "
          f"load average {os.getloadavg()[0]:.1f}, "
          f"{rounds} rounds of {n} steps per variant\n")
    for key in (gp.MODELS if args.model == "all" else [args.model]):
        label, build = gp.MODELS[key]
        print(report(label, build, rounds, n))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
