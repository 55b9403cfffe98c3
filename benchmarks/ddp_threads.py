"""CPU time per thread of a data-parallel step: where a DDP step's time goes on each rank.

    mpiexec -n 2 python benchmarks/ddp_threads.py [--kind 0|1] [--steps 30]

Runs ``bench_ddp``'s actorflow step (``--kind`` 0: the MLP, 1: the GPT example; DDP when
there are several ranks) and prints, per rank, the wall time per step, then each thread's user
and system CPU time and minor page faults per step (from ``/proc/self/task/*/stat``) and the
CPU time of each instruction the communication worker ran. CPU time, unlike wall time, shows
what a step costs even on a machine shared with other work. Start it with 1 BLAS thread per
process (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``), as ``bench_ddp`` does.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from actorflow.vm import scheduler  # noqa: E402
from benchmarks.bench_ddp import af_step  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict:
    """Thread id -> (user seconds, system seconds, minor faults)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[int(tid)] = (int(fields[11]) / _TICK, int(fields[12]) / _TICK, int(fields[7]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kind", type=int, default=0, choices=(0, 1))
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    step = af_step(args.kind, rank, world)
    for _ in range(3):
        step()
    flow.synchronize()
    flow.comm.barrier()
    per = collections.defaultdict(lambda: [0.0, 0])
    run = scheduler._execute

    def timed(ins):  # the CPU time of each instruction run on the communication worker
        if not threading.current_thread().name.endswith("comm"):
            return run(ins)
        name, c0 = ins.name, time.thread_time()
        run(ins)
        rec = per[name]
        rec[0] += time.thread_time() - c0
        rec[1] += 1

    scheduler._execute = timed
    c0, t0 = thread_cpu(), time.perf_counter()
    for _ in range(args.steps):
        step()
    flow.synchronize()
    wall = time.perf_counter() - t0
    c1 = thread_cpu()
    scheduler._execute = run
    names = {t.native_id: t.name for t in threading.enumerate()}
    n = args.steps
    lines = [f"rank {rank}: {wall / n * 1e3:.1f} ms/step wall"]
    for tid in sorted(c1):
        b = c0.get(tid, (0.0, 0.0, 0))
        u, s, f = (c1[tid][i] - b[i] for i in range(3))
        if u + s > 0:
            lines.append(f"  {names.get(tid, tid)!s:28} user {u / n * 1e3:6.2f}  sys "
                         f"{s / n * 1e3:6.2f} ms/step  {f / n:6.0f} minor faults/step")
    for name, (cpu, k) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"    comm worker: {name:18} x{k / n:4.1f}/step  {cpu / n * 1e3:6.2f} "
                     f"ms CPU/step")
    flow.comm.barrier()
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
