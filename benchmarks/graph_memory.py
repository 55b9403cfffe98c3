"""Register memory of one training step of issue #17's models as nn.Graphs, with and without
generated C kernels (``graph.register_memory()``).

    python benchmarks/graph_memory.py [gpt mlp cnn]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks.graph_profile import MODELS, make_graph  # noqa: E402


def main(keys: list) -> None:
    for key in keys or list(MODELS):
        g, step = make_graph(MODELS[key][1])
        step()
        flow.synchronize()
        m = g.register_memory()
        print(f"{key}: {m['with_codegen'] / 2**20:.1f} MiB with generation, "
              f"{m['without_codegen'] / 2**20:.1f} MiB without "
              f"({m['with_codegen'] / m['without_codegen']:.2f}x); "
              f"{g.plan.memory['in_place']} registers written in place")


if __name__ == "__main__":
    main(sys.argv[1:])
