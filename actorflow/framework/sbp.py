"""``flow.sbp``: how a global tensor is laid out over the ranks of its placement (see
``actorflow.framework.placement``)."""
from actorflow.framework.placement import SbpParallel as sbp  # noqa: F401
from actorflow.framework.placement import broadcast, partial_max, partial_sum, split  # noqa: F401

__all__ = ["sbp", "split", "broadcast", "partial_sum", "partial_max"]
