"""Data-parallel training: one process against two, actorflow DDP against PyTorch DDP (gloo).

    python benchmarks/bench_ddp.py [--quick] [--procs 2]

Milliseconds per step of one global batch for the MLP 784-1024-1024-10 (batch 256, SGD) and the
GPT example (batch 32 x 64 tokens, AdamW) of ``bench_eager.py``: actorflow eager
and PyTorch eager on the whole batch in one process, then in ``--procs`` processes
actorflow with ``nn.parallel.DistributedDataParallel``
and PyTorch with ``DistributedDataParallel`` over gloo, each rank taking an equal share of the
batch; both runs are started by ``mpiexec`` from this one command. Every rank runs the
same fixed number of steps per round (collectives need it); a round ends with a sync and a
barrier; figures are the median round. Every process of both runs gets the machine's cores
divided by ``--procs`` as its BLAS/OpenMP threads, so the speed-up is that of data parallelism
alone (and OpenMP's spinning threads do not fight over cores); it needs ``--procs`` free
cores.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks import bench_eager as be  # noqa: E402
from benchmarks.common import quick_parser, table, torch, versions  # noqa: E402

WORKLOADS = ("MLP 784-1024-1024-10, batch 256", "GPT example, batch 32x64")


def _data(kind: int):
    return be.mlp_data() if kind == 0 else be.gpt_data(be.GPT_CONFIG)


def af_step(kind: int, rank: int, world: int):
    """An actorflow step on this rank's share (DDP when ``world`` > 1)."""
    model, opt = be.af_mlp() if kind == 0 else be.af_gpt(be.GPT_CONFIG)
    x, y = _data(kind)
    share = len(x) // world
    x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    step_model = flow.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    loss = be.mlp_loss if kind == 0 else be.gpt_loss
    return be.eager_step(step_model, opt, loss, flow.from_numpy(x), flow.from_numpy(y))


def torch_step(kind: int, rank: int, world: int):
    """A PyTorch step on this rank's share (DistributedDataParallel over gloo when
    ``world`` > 1)."""
    x, y = _data(kind)
    share = len(x) // world
    x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
    torch.manual_seed(0)
    if kind == 0:
        tm = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(),
                                 torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                 torch.nn.Linear(1024, 10))
        opt = torch.optim.SGD(tm.parameters(), lr=0.01)
    else:
        tm = be.torch_gpt(be.GPT_VOCAB, be.GPT_CONFIG)
        opt = torch.optim.AdamW(tm.parameters(), **be.GPT_ADAMW)
    run = torch.nn.parallel.DistributedDataParallel(tm) if world > 1 else tm
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        out = run(tx)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), ty.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def timed(step, steps: int, rounds: int, sync, barrier) -> float:
    """Median seconds per step over ``rounds`` rounds of ``steps`` steps (after a warm-up)."""
    for _ in range(3):
        step()
    sync()
    barrier()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        barrier()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def worker(steps: int, rounds: int) -> None:
    """Run under mpiexec: time the steps (data parallel when there are several ranks); rank 0
    prints one JSON line."""
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    out = {"af": [], "torch": []}
    for kind in range(len(WORKLOADS)):
        out["af"].append(timed(af_step(kind, rank, world), steps, rounds, flow.synchronize,
                               flow.comm.barrier))
    if torch is not None:
        import torch.distributed as dist

        if world > 1:
            dist.init_process_group("gloo", rank=rank, world_size=world)
        for kind in range(len(WORKLOADS)):
            out["torch"].append(timed(torch_step(kind, rank, world), steps, rounds,
                                      lambda: None, dist.barrier if world > 1 else lambda: None))
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(procs: int, threads: int, quick: bool) -> dict:
    """Run the worker on ``procs`` processes of ``threads`` BLAS/OpenMP threads each."""
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    threads = str(threads)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
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
    p.add_argument("--worker", action="store_true", help=argparse_hidden())
    args = p.parse_args()
    steps, rounds = (3, 3) if args.quick else (10, 5)
    if args.worker:
        worker(steps, rounds)
        return
    print(versions())
    n = args.procs
    threads = max(1, (os.cpu_count() or 1) // n)
    print(f"{threads} BLAS/OpenMP thread(s) per process in both runs\n")
    one, many = launch(1, threads, args.quick), launch(n, threads, args.quick)
    rows = []
    for k, name in enumerate(WORKLOADS):
        a1, an = one["af"][k], many["af"][k]
        row = [name, f"{a1 * 1e3:.1f}", f"{an * 1e3:.1f}", f"{a1 / an:.2f}x"]
        if one["torch"]:
            t1, tn = one["torch"][k], many["torch"][k]
            row += [f"{t1 * 1e3:.1f}", f"{tn * 1e3:.1f}", f"{t1 / tn:.2f}x", f"{an / tn:.2f}"]
        rows.append(row)
    headers = ["ms per global step", "actorflow 1 proc", f"actorflow DDP {n} procs", "speed-up"]
    if one["torch"]:
        headers += ["PyTorch 1 proc", f"PyTorch DDP gloo {n} procs", "speed-up",
                    "actorflow / PyTorch (DDP)"]
    print(table(rows, headers))


def argparse_hidden():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
