"""``flow.env``: where this process stands among the processes of one program (OneFlow's API).

A program started by ``mpiexec -n N`` (or ``python -m actorflow.distributed.launch
--nproc_per_node N``) has N ranks; a plain ``python`` run has one. See
``actorflow.process.world``.
"""
from __future__ import annotations

from actorflow.process.world import (  # noqa: F401  (flow.env's API)
    get_local_rank, get_node_size, get_rank, get_world_size, world,
)
from actorflow.framework.placement import placement


def is_multi_client() -> bool:
    """Always True, as in OneFlow 0.8+: every process runs the program itself."""
    return True


def all_device_placement(device_type: str = "cpu"):
    """A placement of every rank of the program on ``device_type`` devices."""
    return placement.all(device_type)


__all__ = ["all_device_placement", "get_rank", "get_world_size", "get_local_rank",
           "get_node_size", "is_multi_client"]
