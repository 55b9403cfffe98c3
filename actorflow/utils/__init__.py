"""Utilities: ``actorflow.utils.data`` (datasets, samplers, DataLoader) and
``actorflow.utils.tensor`` (``from_torch``), ``actorflow.utils.checkpoint``,
``actorflow.utils.global_view`` (to_global/to_local of nested structures)."""
from actorflow.utils import checkpoint  # noqa: F401
from actorflow.utils import data  # noqa: F401
from actorflow.utils import global_view  # noqa: F401
from actorflow.utils import tensor  # noqa: F401
