"""``actorflow.nn.parallel``: data-parallel training over the processes of one program."""
from actorflow.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
