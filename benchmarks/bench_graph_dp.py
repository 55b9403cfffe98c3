"""Data parallel as a global nn.Graph against eager DDP and PyTorch DDP, and the compile time of
a 2-rank Job + Plan.

    python benchmarks/bench_graph_dp.py [--quick] [--procs 2]

Milliseconds per step of one global batch for the MLP 784-1024-1024-10 (batch 256, SGD) and the
GPT example (batch 32 x 64 tokens, AdamW) of ``bench_eager.py``, in one process on the whole
batch and in ``--procs`` processes (``mpiexec``, started by this command) each on an equal
share: actorflow's nn.Graph on the actor runtime (on several processes: the parameters
broadcast, the batch split(0); data parallelism falls out of the sbp), actorflow eager with
``nn.parallel.DistributedDataParallel`` and PyTorch ``DistributedDataParallel`` over gloo.
Every process has one BLAS/OpenMP thread, so the speed-up is that of data parallelism alone.
Each rank runs the same number of steps per round; a round ends with a sync and a barrier;
figures are the median round. The compile time of the GPT training graph (trace, passes,
Plan, actors: the first call minus a later one, the fastest of two fresh graphs) is measured
on one rank and on each of the ``--procs`` ranks (rank 0's figure; the global trace also
boxes and numbers the collectives).
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks import bench_ddp as bd  # noqa: E402
from benchmarks import bench_eager as be  # noqa: E402
from benchmarks.common import quick_parser, table, torch, versions  # noqa: E402

WORKLOADS = bd.WORKLOADS


def _graph(kind: int):
    """A training nn.Graph of workload ``kind`` on global parameters (broadcast) when there
    are several ranks; returns (graph, x, y) with the batch split(0) over the ranks."""
    model, opt = be.af_mlp() if kind == 0 else be.af_gpt(be.GPT_CONFIG)
    x, y = bd._data(kind)
    loss_fn = be.mlp_loss if kind == 0 else be.gpt_loss
    if flow.env.get_world_size() > 1:
        pl = flow.placement.all("cpu")
        model.to_global(placement=pl, sbp=flow.sbp.broadcast)
        x = flow.tensor(x, placement=pl, sbp=flow.sbp.split(0))
        y = flow.tensor(y, placement=pl, sbp=flow.sbp.split(0))
    else:
        x, y = flow.from_numpy(x), flow.from_numpy(y)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = loss_fn(self.model, x, y)
            loss.backward()
            return loss
    return Train(), x, y


def graph_step(kind: int):
    """A step of the (global, when several ranks) training graph; the first call compiles."""
    g, x, y = _graph(kind)
    return lambda: g(x, y)


def compile_seconds(repeat: int = 2) -> float:
    """Seconds to compile the GPT training graph: the first call minus a later one, the
    fastest of ``repeat`` fresh graphs (every rank compiles its own Plan)."""
    best = float("inf")
    for _ in range(repeat):
        g, x, y = _graph(1)
        gc.collect()
        flow.comm.barrier()
        t = []
        for _ in range(2):
            t0 = time.perf_counter()
            g(x, y)
            flow.synchronize()
            t.append(time.perf_counter() - t0)
        best = min(best, t[0] - t[1])
        g.close()
    return best


def worker(steps: int, rounds: int) -> None:
    """Run under mpiexec: time each runner; rank 0 prints one JSON line."""
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    out = {"graph": [], "af": [], "torch": [], "compile": compile_seconds()}
    for kind in range(len(WORKLOADS)):
        out["graph"].append(bd.timed(graph_step(kind), steps, rounds, flow.synchronize,
                                     flow.comm.barrier))
        out["af"].append(bd.timed(bd.af_step(kind, rank, world), steps, rounds,
                                  flow.synchronize, flow.comm.barrier))
    if torch is not None:
        import torch.distributed as dist

        if world > 1:
            dist.init_process_group("gloo", rank=rank, world_size=world)
        for kind in range(len(WORKLOADS)):
            out["torch"].append(bd.timed(bd.torch_step(kind, rank, world), steps, rounds,
                                         lambda: None,
                                         dist.barrier if world > 1 else lambda: None))
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def launch(procs: int, quick: bool) -> dict:
    """Run the worker on ``procs`` processes of one BLAS/OpenMP thread each."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(bd._free_port()),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    cmd = [mpiexec, "-n", str(procs), sys.executable, os.path.abspath(__file__), "--worker"]
    if quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the {procs}-process run failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(lines[0][len("RESULT "):])


def main() -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--worker", action="store_true", help=bd.argparse_hidden())
    args = p.parse_args()
    steps, rounds = (3, 3) if args.quick else (5, 3)
    if args.worker:
        worker(steps, rounds)
        return
    print(versions())
    n = args.procs
    print(f"1 BLAS/OpenMP thread per process; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the start\n")
    one, many = launch(1, args.quick), launch(n, args.quick)
    rows = []
    for k, name in enumerate(WORKLOADS):
        g1, gn, a1, an = one["graph"][k], many["graph"][k], one["af"][k], many["af"][k]
        row = [name, f"{g1 * 1e3:.1f}", f"{gn * 1e3:.1f}", f"{g1 / gn:.2f}x",
               f"{a1 * 1e3:.1f}", f"{an * 1e3:.1f}"]
        if one["torch"]:
            t1, tn = one["torch"][k], many["torch"][k]
            row += [f"{t1 * 1e3:.1f}", f"{tn * 1e3:.1f}", f"{gn / tn:.2f}"]
        rows.append(row)
    headers = ["ms per global step", "graph 1 proc", f"global graph {n} procs", "speed-up",
               "eager 1 proc", f"eager DDP {n} procs"]
    if one["torch"]:
        headers += ["PyTorch 1 proc", f"PyTorch DDP gloo {n} procs",
                    f"global graph / PyTorch DDP ({n} procs)"]
    print(table(rows, headers))
    print()
    print(table([["GPT example training graph (2 layers)", f"{one['compile'] * 1e3:.0f}",
                  f"{many['compile'] * 1e3:.0f}", f"{many['compile'] / one['compile']:.2f}x"]],
                ["compile: trace + passes + Plan + actors", "ms, 1 rank",
                 f"ms, rank 0 of {n}", "ratio"]))


if __name__ == "__main__":
    main()
