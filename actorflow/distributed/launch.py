"""``python -m actorflow.distributed.launch --nproc_per_node N script.py args...``

Starts N processes of ``script.py`` through the mpich wheel's ``mpiexec`` (the one installed
next to this Python, else the first on PATH), so that they form one program (see
``actorflow.process.world``). OneFlow's launcher flags, and what they map to:

* ``--nproc_per_node N``: processes per machine (``mpiexec -ppn N``);
* ``--nnodes M`` with ``--hosts h1,h2,...`` (M names): run on those machines
  (``mpiexec -hosts h1,h2 -n M*N``); MPI starts every machine's processes from this one
  launch, so OneFlow's per-machine ``--node_rank`` is not needed (only 0 is accepted);
* ``--master_addr`` / ``--master_port``: exported as ``MASTER_ADDR`` / ``MASTER_PORT`` (MPI
  does not use them; they are there for code that reads them).

The exit status is the processes' (non-zero if any failed). A rank that ends early fails the
launch too, even with exit status 0 (on one machine, where the ranks can tell the launcher how
they left): every rank waits at exit for the others (``process.watchdog.exit_barrier``, at
most 10 s or ``ACTORFLOW_COMM_TIMEOUT``); a rank whose wait ran out left while others were still
running, and a rank that left without that wait (``os._exit``, a signal) said nothing. Either
makes the launcher print which ranks and fail: status 1, or mpiexec's own status where
mpiexec failed too (it may kill the other ranks of a rank that skipped ``MPI_Finalize``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from actorflow.process.watchdog import STATUS_DIR_VAR


def find_mpiexec() -> str:
    """The ``mpiexec`` next to this Python (the mpich wheel's), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError("actorflow.distributed.launch: no mpiexec found; install the "
                                "mpi extra (pip install 'actorflow[mpi]')")
    return found


def build_command(args: argparse.Namespace) -> list:
    """The mpiexec command line for parsed launcher ``args``."""
    if args.nproc_per_node < 1 or args.nnodes < 1:
        raise ValueError("--nproc_per_node and --nnodes must be at least 1")
    if args.node_rank != 0:
        raise ValueError("--node_rank: one launch starts the processes of every machine (MPI); "
                         "run the launcher once, on one machine, with --hosts")
    cmd = [find_mpiexec()]
    if args.nnodes > 1:
        hosts = [h for h in (args.hosts or "").split(",") if h]
        if len(hosts) != args.nnodes:
            raise ValueError(f"--nnodes {args.nnodes} needs --hosts with {args.nnodes} machine "
                             f"names (got {len(hosts)})")
        cmd += ["-hosts", ",".join(hosts), "-ppn", str(args.nproc_per_node)]
    cmd += ["-n", str(args.nnodes * args.nproc_per_node)]
    if args.module:
        cmd += [sys.executable, "-m", args.script]
    else:
        cmd += [sys.executable, args.script]
    return cmd + list(args.script_args)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m actorflow.distributed.launch",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc_per_node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node_rank", type=int, default=0)
    p.add_argument("--hosts", default="", help="comma-separated machine names (--nnodes > 1)")
    p.add_argument("--master_addr", default="127.0.0.1")
    p.add_argument("--master_port", type=int, default=29500)
    p.add_argument("-m", "--module", action="store_true", help="run script as a module")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    try:
        cmd = build_command(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"actorflow.distributed.launch: {e}", file=sys.stderr)
        return 2
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port))
    n = args.nnodes * args.nproc_per_node
    if args.nnodes > 1 or n == 1:  # other machines can't write here; one process has no peers
        return subprocess.call(cmd, env=env)
    with tempfile.TemporaryDirectory(prefix="actorflow-launch-") as status:
        env[STATUS_DIR_VAR] = status
        rc = subprocess.call(cmd, env=env)
        problem = early_ranks(status, n)
    if problem:  # (also when mpiexec already failed: it may have killed the other ranks)
        print(f"actorflow.distributed.launch: {problem}; the launch failed", file=sys.stderr)
        return rc or 1
    return rc


def early_ranks(directory: str, n: int) -> str:
    """What the ``n`` ranks' exit statuses in ``directory`` say went wrong ("" if every rank
    reached the end of the program with the others). A rank ended early when its exit wait ran
    out and it arrived there more than that wait before the last rank did; a rank that wrote
    nothing left without actorflow's exit."""
    arrived, bound, silent = {}, {}, []
    for r in range(n):
        try:
            with open(os.path.join(directory, f"rank{r}")) as f:
                words = f.read().split()
            arrived[r] = float(words[1])
            if words[0] != "complete":
                bound[r] = float(words[2])
        except (OSError, IndexError, ValueError):
            silent.append(r)
    parts = []
    if bound:
        last = max(arrived.values())
        early = [r for r in sorted(bound) if last - arrived[r] >= bound[r]]
        if early:
            parts.append(f"rank(s) {early} ended early: they reached the end of the program "
                         f"while other ranks were still running")
        elif not silent:
            parts.append(f"rank(s) {sorted(bound)} left without every rank at the exit")
    if silent:
        parts.append(f"rank(s) {silent} ended without actorflow's orderly exit (os._exit, a "
                     f"signal, or the process never started)")
    return "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
