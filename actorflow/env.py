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


def init_rdma() -> None:
    """Turn on OneFlow's own RDMA transport: actorflow has none, so this raises
    RuntimeError. Ranks exchange data over MPI, whose library uses RDMA by itself where its
    build and the network support it (nothing to turn on here)."""
    raise RuntimeError("env.init_rdma: actorflow has no RDMA transport of its own; ranks "
                       "communicate over MPI, which uses RDMA itself where the MPI build and "
                       "the network support it")


def rdma_is_initialized() -> bool:
    """Whether ``init_rdma`` turned RDMA on: never (see ``init_rdma``)."""
    return False


__all__ = ["init_rdma", "rdma_is_initialized", "all_device_placement", "get_rank",
           "get_world_size", "get_local_rank",
           "get_node_size", "is_multi_client"]
