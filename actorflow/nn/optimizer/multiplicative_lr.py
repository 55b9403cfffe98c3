"""``oneflow.nn.optimizer.multiplicative_lr``: ``MultiplicativeLR`` (from ``actorflow.optim``)."""
from actorflow.optim.lr_scheduler import MultiplicativeLR

__all__ = ["MultiplicativeLR"]
