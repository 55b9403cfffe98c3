"""``flow.distributed``: several processes, one program.

The process facts it offers (rank, world size, local rank, nodes, ``simulate_rank``) live in
``actorflow/process/`` (with the MPI groups and the watchdog), below the ops that use them;
checking the ranks' compiled Plans against each other is ``compiler/plan_check.py`` (the
summaries and their comparison) and ``nn/graph/plan_check.py`` (compiling every rank's Plan).
``launch.py`` is the launcher (``python -m actorflow.distributed.launch``). The other
user-facing APIs on the process group are ``flow.env`` and ``flow.comm``.
"""
from actorflow.process.world import (  # noqa: F401,E402  (flow.distributed's API)
    get_local_rank, get_node_size, get_rank, get_world_size, simulate_rank,
)
from actorflow.compiler.plan_check import compare_plans, plan_summary  # noqa: F401,E402
from actorflow.nn.graph.plan_check import check_plans, simulate_plans  # noqa: F401,E402
