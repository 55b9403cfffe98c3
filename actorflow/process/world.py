"""This process's place among the processes running one program.

Started by ``mpiexec -n N`` (MPICH sets ``PMI_RANK``/``PMI_SIZE``; Open MPI
``OMPI_COMM_WORLD_*``), the process joins ``MPI.COMM_WORLD`` (mpi4py, asked for
``MPI_THREAD_MULTIPLE``: the VM's communication worker calls MPI) and exports the variables
OneFlow's launcher sets: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` (MPI needs neither of the last two; they are set, if unset,
to 127.0.0.1 on one machine (rank 0's host name across machines) and 29500, for code that reads
them). Without an MPI launch, or with one process, the world has size 1, mpi4py is never
imported and the environment is left as it is. ``import actorflow`` makes the world, so the
variables are there from the start.

``simulate_rank(r, n)`` lets one process play rank r of n for a while, to trace and compile
what that rank would (``plan_check.check_plans(make, world_size=n)``), without communicating.
"""
from __future__ import annotations

import contextlib
import os
import socket
import threading

_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS")


class World:
    """Rank, size, local rank and node count of this process (see the module docstring)."""

    simulated = False  # True for a ``simulate_rank`` world (no communicator, no data)

    def __init__(self):
        self.comm = None
        self.control = None  # a duplicate of comm for metadata exchanges (process.groups)
        self.rank, self.size = 0, 1
        self.local_rank, self.local_size, self.node_size = 0, 1, 1
        launched = max((int(os.environ.get(v, "1") or 1) for v in _SIZE_VARS), default=1)
        if launched > 1:
            self._join_mpi(launched)
            self._export()  # a one-process program leaves the environment alone (OneFlow)

    def _join_mpi(self, launched: int) -> None:
        try:
            import mpi4py
        except ImportError:
            raise ImportError(
                f"actorflow: this process was started by an MPI launcher with {launched} "
                f"processes, but mpi4py is not installed; install the mpi extra "
                f"(pip install 'actorflow[mpi]')") from None
        mpi4py.rc.thread_level = "multiple"
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        # one leader per node: the number of leaders is the number of nodes
        self.node_size = comm.allreduce(1 if self.local_rank == 0 else 0)
        # one machine: the loopback address, as OneFlow's launcher sets it; else rank 0's host
        host = socket.gethostname() if self.rank == 0 else None
        self.master_addr = "127.0.0.1" if self.node_size == 1 else comm.bcast(host, root=0)
        local.Free()
        self.control = comm.Dup()

    def _export(self) -> None:
        env = os.environ
        env["RANK"], env["WORLD_SIZE"] = str(self.rank), str(self.size)
        env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"] = str(self.local_rank), str(self.local_size)
        env.setdefault("MASTER_ADDR", self.master_addr)
        env.setdefault("MASTER_PORT", "29500")

    @property
    def is_multi_process(self) -> bool:
        return self.size > 1


_world: World | None = None


def world() -> World:
    """The process group of this program (made on first use)."""
    global _world
    if _world is None:
        _world = World()
        if _world.is_multi_process:
            from actorflow.process import watchdog

            watchdog.install(_world)
    return _world


class SimulatedWorld(World):
    """Rank ``rank`` of ``size`` processes that don't exist (see ``simulate_rank``)."""

    simulated = True

    def __init__(self, rank: int, size: int):  # (no MPI, the environment left alone)
        self.comm = self.control = None
        self.rank, self.size = rank, size
        self.local_rank, self.local_size, self.node_size = rank, size, 1


_simulating = threading.Lock()


@contextlib.contextmanager
def simulate_rank(rank: int, world_size: int):
    """Within the block this process plays rank ``rank`` of ``world_size``: ``world()``
    reports them, no communicator exists, metadata exchanges answer as if every rank passed
    what this one does (``groups.allgather_object``), and global tensors hold meta shards
    (``dispatch.global_tensor``: shapes and SBPs, no values), so no kernel of a global op and
    no collective runs. For tracing and compiling what that rank would
    (``plan_check.check_plans(make, world_size=N)``); not for running graphs. The real world
    is back on exit, also when the block raises; the VM is drained on entry and on a normal
    exit. Other threads see the simulated world too: run no graph meanwhile."""
    if not isinstance(world_size, int) or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"simulate_rank: rank {rank!r} of world_size {world_size!r}: need "
                         f"0 <= rank < world_size")
    from actorflow import vm  # late: the lowest layers import this module

    global _world
    if not _simulating.acquire(blocking=False):
        raise RuntimeError("simulate_rank: already simulating a rank (one at a time)")
    try:
        vm.synchronize()  # eager work issued in the real world finishes in it
        real = world()
        _world = SimulatedWorld(rank, world_size)
        try:
            yield _world
            vm.synchronize()
        finally:
            _world = real
    finally:
        _simulating.release()


def get_rank() -> int:
    """This process's rank (0 .. world size - 1)."""
    return world().rank


def get_world_size() -> int:
    """How many processes run the program."""
    return world().size


def get_local_rank() -> int:
    """This process's rank among the processes on its machine."""
    return world().local_rank


def get_node_size() -> int:
    """How many machines the processes run on."""
    return world().node_size
