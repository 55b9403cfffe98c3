"""All-reduce bandwidth: ``flow.comm.all_reduce`` against mpi4py and torch.distributed (gloo).

    python benchmarks/bench_allreduce.py [--quick] [--procs 2] [--profile]

Sums a float32 tensor of 4 KiB .. 64 MiB over ``--procs`` processes started by ``mpiexec``
from this one command: actorflow's ``flow.comm.all_reduce`` (an instruction on the VM's
communication worker) followed by ``flow.synchronize()`` each call; mpi4py's ``Allreduce``
(in place) called directly on a NumPy array, the floor actorflow's MPI path can reach; and
``torch.distributed.all_reduce`` over gloo in the same processes. Every rank runs the same
number of calls; the three take turns round by round, each round between two barriers. Times
are the fastest round's time per call; ratios are the median over rounds of the ratio within a
round, which a shared, loaded machine disturbs least.
GB/s is the algorithm bandwidth (bytes of the tensor / time per call). ``--profile`` prints,
for the smallest size, where actorflow's time per call goes (cProfile of rank 0).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks.common import quick_parser, table, torch, versions  # noqa: E402

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _calls(nbytes: int, quick: bool) -> int:
    """Calls per round: about 64 MiB moved per round, at least 3, at most 200."""
    n = max(3, min(200, (64 << 20) // nbytes))
    return max(3, n // 4) if quick else n


def _rounds(quick: bool) -> int:
    return 3 if quick else 15


def race(calls_by_name: dict, calls: int, rounds: int, barrier) -> dict:
    """Seconds per call of each runner in each of ``rounds`` rounds of ``calls`` calls, the
    runners taking turns round by round (so a slow phase of the shared machine hits them
    alike), every round starting and ending with a barrier (the end inside the timed region).
    """
    for call in calls_by_name.values():
        for _ in range(3):
            call()
    times = {name: [] for name in calls_by_name}
    for _ in range(rounds):
        for name, call in calls_by_name.items():
            barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            barrier()
            times[name].append((time.perf_counter() - t0) / calls)
    return times


def worker(quick: bool, profile: bool) -> None:
    """Run under mpiexec: time the three all-reduces for every size; rank 0 prints one JSON
    line."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    dist = None
    if torch is not None:
        import torch.distributed as dist

        dist.init_process_group("gloo", rank=rank, world_size=world)
    rounds = _rounds(quick)
    out = {"af": [], "mpi": [], "torch": []}
    for nbytes in SIZES:
        n = nbytes // 4
        t = flow.zeros(n, dtype=flow.float32)  # zeros: repeated sums stay finite
        a = np.zeros(n, np.float32)

        def af_call(t=t):
            flow.comm.all_reduce(t)
            flow.synchronize()

        runners = {"af": af_call,
                   "mpi": lambda a=a: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)}
        if dist is not None:
            tt = torch.zeros(n, dtype=torch.float32)
            runners["torch"] = lambda tt=tt: dist.all_reduce(tt)
        for name, secs in race(runners, _calls(nbytes, quick), rounds, comm.Barrier).items():
            out[name].append(secs)
    if profile:
        import cProfile
        import pstats

        t = flow.zeros(SIZES[0] // 4)
        prof = cProfile.Profile()
        comm.Barrier()
        prof.enable()
        for _ in range(2000):
            flow.comm.all_reduce(t)
            flow.synchronize()
        prof.disable()
        comm.Barrier()
        if rank == 0:
            pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(14)
    if dist is not None:
        dist.destroy_process_group()
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ratio(ref: list, other: list) -> float:
    """The median over rounds of ref's time / other's (rounds taken in turn: one phase of the
    machine)."""
    return statistics.median(a / b for a, b in zip(ref, other))


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def main() -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--profile", action="store_true", help="profile the smallest size")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.quick, args.profile)
        return
    print(versions())
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    cmd = [mpiexec, "-n", str(args.procs), sys.executable, os.path.abspath(__file__),
           "--worker"] + (["--quick"] if args.quick else []) + \
        (["--profile"] if args.profile else [])
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"the run failed:\n{done.stdout}\n{done.stderr}")
    if args.profile:
        print(done.stderr)
    res = json.loads(lines[0][len("RESULT "):])
    rows = []
    for k, nbytes in enumerate(SIZES):
        af, mpi = res["af"][k], res["mpi"][k]
        row = [_size(nbytes), f"{min(af) * 1e6:.0f}", f"{nbytes / min(af) / 1e9:.2f}",
               f"{min(mpi) * 1e6:.0f}", f"{nbytes / min(mpi) / 1e9:.2f}",
               f"{_ratio(mpi, af):.2f}x"]
        if res["torch"]:
            tg = res["torch"][k]
            row += [f"{min(tg) * 1e6:.0f}", f"{nbytes / min(tg) / 1e9:.2f}",
                    f"{_ratio(mpi, tg):.2f}x"]
        rows.append(row)
    headers = ["size", "actorflow µs", "GB/s", "mpi4py µs", "GB/s", "actorflow vs mpi4py"]
    if res["torch"]:
        headers += ["gloo µs", "GB/s", "gloo vs mpi4py"]
    print(f"float32 all-reduce over {args.procs} processes; µs: the fastest round's time per "
          f"call; 'vs mpi4py': the median over rounds of mpi4py's time / the other's in the "
          f"same round (1.00x: as fast)\n")
    print(table(rows, headers))


if __name__ == "__main__":
    main()
