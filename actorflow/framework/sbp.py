"""``flow.sbp``: how a global tensor is laid out over the ranks of its placement (the value
type and its layout math live in ``actorflow.framework.sbp_parallel``)."""
from actorflow.framework.sbp_parallel import SbpParallel as sbp  # noqa: F401
from actorflow.framework.sbp_parallel import broadcast, partial_max, partial_sum, split  # noqa: F401

__all__ = ["sbp", "split", "broadcast", "partial_sum", "partial_max"]
