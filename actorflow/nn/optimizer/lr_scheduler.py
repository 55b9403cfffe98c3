"""``oneflow.nn.optimizer.lr_scheduler``: the schedulers' base class (from ``actorflow.optim``)."""
from actorflow.optim.lr_scheduler import LRScheduler, _LRScheduler  # noqa: F401

__all__ = ["LRScheduler"]
