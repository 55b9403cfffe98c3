"""Several processes, one program: the process group over MPI and the launcher.

``world.py`` knows this process's place (rank, world size, local rank, nodes) and owns the
MPI communicator when the program was started by ``mpiexec`` (or ``python -m
actorflow.distributed.launch``); a one-process program never imports mpi4py. ``watchdog.py``
bounds every wait between ranks. The user-facing APIs built on it are ``flow.env`` and
``flow.comm`` (collectives on local tensors, run on the VM's communication worker).
"""
from actorflow.distributed.world import (  # noqa: F401,E402  (flow.distributed's API)
    get_local_rank, get_node_size, get_rank, get_world_size, simulate_rank,
)
from actorflow.distributed.plan_check import (  # noqa: F401,E402
    check_plans, compare_plans, plan_summary, simulate_plans,
)
