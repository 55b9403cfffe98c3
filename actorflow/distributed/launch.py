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

The exit status is the processes' (non-zero if any failed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys


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
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
