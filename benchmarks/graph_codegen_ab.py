"""nn.Graph with and without generated kernels, and eager, on one model in ONE process, rounds
interleaved (so load from elsewhere falls on all three alike; each one's fastest round counts).

    ACTORFLOW_GRAPH_CODEGEN is set by this script per graph; run e.g.
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/graph_codegen_ab.py \
        [--model gpt|mlp|cnn] [--rounds 6] [--steps 5]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.graph_profile import MODELS, make_eager, make_graph, step_time  # noqa: E402


def main(argv=None) -> None:
    """Print per-round best step times (ms) and the ratios."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=list(MODELS), default="gpt")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args(argv)
    build = MODELS[args.model][1]
    runners = {}
    for key, flag in (("graph+codegen", "1"), ("graph", "0")):
        os.environ["ACTORFLOW_GRAPH_CODEGEN"] = flag  # read when the graph compiles
        g, step = make_graph(build)
        step()
        runners[key] = step
        if flag == "1":
            tasks = g.plan.codegen.get("tasks", {})
            n_rows = sum(1 for t in tasks.values() if t.get("rows"))
            print(f"generated tasks: {len(tasks)} ({n_rows} row kernels)")
    runners["eager"] = make_eager(build)[3]
    runners["eager"]()
    best = dict.fromkeys(runners, float("inf"))
    for r in range(args.rounds):
        for key, step in runners.items():
            best[key] = min(best[key], step_time(step, args.steps, 1))
        print(r, {k: round(v * 1e3, 2) for k, v in best.items()}, flush=True)
    e = best["eager"]
    print(f"graph+codegen / eager {best['graph+codegen'] / e:.2f}; graph / eager "
          f"{best['graph'] / e:.2f}; graph+codegen / graph "
          f"{best['graph+codegen'] / best['graph']:.2f}")


if __name__ == "__main__":
    main()
