"""ZeRO stage 3's ``shard_restore_level`` 0, 1, 2 against no ZeRO, in the global nn.Graph.

    mpiexec -n 2 python benchmarks/bench_zero_levels.py [--quick]

(the venv's ``mpiexec``). The MLP 784-1024-1024-10 of ``bench_eager.py`` (float32, Adam,
batch 256 split(0), the parameters broadcast), with 1 and 2 micro-batches of gradient
accumulation. Per configuration rank 0 prints: the logical bytes of the Job's collectives per
call (an op of the micro stage counted once per micro-batch; slices and B -> P, which move
nothing, left out), this rank's bytes of parameter variables and of the whole memory plan
(with sharing), and ms per call: the best of the rounds, the configurations taking turns
round by round (each round a fixed number of calls on every rank, so the ranks stay in step).
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks import bench_eager as be  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402
from actorflow.nn.graph.zero import parameter_bytes  # noqa: E402

_MOVES_NOTHING = ("boxing_b_to_s", "boxing_b_to_p")


def _graph(level, acc: int):
    """The training graph (level None: no ZeRO) and its global inputs."""
    model, _ = be.af_mlp()
    pl = flow.placement.all("cpu")
    model.to_global(placement=pl, sbp=flow.sbp.broadcast)
    opt = flow.optim.Adam(model.parameters(), lr=1e-3)
    x, y = be.mlp_data()
    x = flow.tensor(x, placement=pl, sbp=flow.sbp.split(0))
    y = flow.tensor(y, placement=pl, sbp=flow.sbp.split(0))

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            self.config.set_gradient_accumulation_steps(acc)
            if level is not None:
                self.config.enable_zero(True, stage=3, shard_restore_level=level)

        def build(self, x, y):
            loss = be.mlp_loss(self.model, x, y)
            loss.backward()
            return loss

    return Train(), x, y


def _collective_bytes(job, acc: int) -> int:
    return sum(int(o.tags["boxing"]["bytes"]) * (acc if o.tags.get("stage") == "micro" else 1)
               for o in job.ops if "boxing" in o.tags and o.op_type.startswith("boxing_")
               and o.op_type not in _MOVES_NOTHING)


def main() -> None:
    args = quick_parser(__doc__).parse_args()
    rank = flow.env.get_rank()
    rounds, calls = (3, 2) if args.quick else (7, 5)
    rows = []
    for acc in (1, 2):
        runs = {}
        for level in (None, 0, 1, 2):
            g, x, y = _graph(level, acc)
            g(x, y).numpy()  # compile
            runs[level] = (g, x, y)
        best = {level: float("inf") for level in runs}
        for _ in range(rounds):
            for level, (g, x, y) in runs.items():
                flow.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    loss = g(x, y)
                loss.numpy()
                best[level] = min(best[level], (time.perf_counter() - t0) / calls)
        for level, (g, _, _) in runs.items():
            plan = next(reversed(g._cache.values())).plan
            rows.append((acc, "no ZeRO" if level is None else f"stage 3, level {level}",
                         _collective_bytes(g.full_job, acc), parameter_bytes(g),
                         plan.memory["bytes_with_sharing"], f"{best[level] * 1e3:.1f}"))
    if rank == 0:
        print(versions())
        print(table(rows, ("micro-batches", "config", "collective bytes per call",
                           "parameter bytes (rank 0)", "plan bytes (rank 0)", "ms per call")))


if __name__ == "__main__":
    main()
