"""The actor runtime: µs per act, µs per graph call, and training steps against the peers.

    .venv/bin/python benchmarks/bench_runtime.py [--quick]

* µs per act on a chain of 1,000 tiny ops (the runtime's per-act cost: messages, readiness,
  the kernel call), with the reference executor's µs per op beside it;
* µs per call of a one-op graph (the whole path: VM instruction, buffers, source, sink);
* ms per training step of the MLP 784-1024-1024-10 (batch 256, SGD) and of the GPT example
  (AdamW) for the graph on the actor runtime and on the reference executor, eager actorflow,
  PyTorch eager (when installed) and, for the MLP, the hand-written NumPy step - timed by
  ``bench_graph``'s runners, which take turns round by round so machine load falls on all alike.
Everything is measured in one run; the ratios are against the references of that run.
"""
from __future__ import annotations

import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
import actorflow.nn as nn  # noqa: E402
from actorflow.dispatch.lazy import LazyInterpreter  # noqa: E402
from actorflow.job.executor import ReferenceExecutor  # noqa: E402
from actorflow.runtime.executor import RuntimeExecutor  # noqa: E402
from benchmarks import bench_graph  # noqa: E402
from benchmarks.common import quick_parser, table, time_per_call  # noqa: E402


def chain_acts(n: int = 1000) -> tuple:
    """µs per act (runtime) and per op (reference executor) on a chain of n tiny adds."""
    x = flow.randn(4)
    b = LazyInterpreter("chain")
    with b:
        h = b.add_input(0, "x", x)
        for _ in range(n):
            h = h + 1.0
        b.add_output(0, "y", h)
    xa = x.numpy()
    rx, ref = RuntimeExecutor(b.job), ReferenceExecutor(b.job)
    acts = len(rx.plan.tasks)
    t_rt = time_per_call(lambda: rx.run([xa], {}), min_time=1.0)
    t_ref = time_per_call(lambda: ref.run([xa], {}), min_time=1.0)
    rx.close()
    return t_rt / acts * 1e6, t_ref / n * 1e6, acts


def one_op_call() -> float:
    """µs per call of a graph holding one relu, output read back."""
    class G(nn.Graph):
        def build(self, x):
            return x.relu()

    g = G()
    x = flow.randn(16)
    t = time_per_call(lambda: g(x).numpy(), min_time=1.0)
    g.close()
    return t * 1e6


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0]).parse_args()
    act_us, ref_us, acts = chain_acts()
    call_us = one_op_call()
    print(table([[f"{act_us:.1f}", f"{ref_us:.1f}", acts, f"{call_us:.0f}"]],
                ["µs per act (runtime)", "µs per op (reference)", "acts per call",
                 "µs per call, one-op graph"]))
    print()
    min_time = 0.3 if args.quick else 1.0
    mlp, mlp_ops = bench_graph.mlp_steps(min_time)
    rows = bench_graph.step_rows(f"MLP 784-1024-1024-10, b256, SGD ({mlp_ops} ops)", mlp)
    cfg = {"batch": 32, "block": 64, "layers": 2, "heads": 4, "embd": 64}
    gpt, gpt_ops = bench_graph.gpt_steps(min_time, cfg)
    rows += bench_graph.step_rows(f"GPT example (b32, T64, 2 layers, d64), AdamW ({gpt_ops} "
                                  f"ops)", gpt)
    print(table(rows, ["model", "runner", "ms/step", "vs eager", "vs PyTorch", "vs NumPy"]))


if __name__ == "__main__":
    main()
