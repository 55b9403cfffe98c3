"""Utilities: ``actorflow.utils.data`` (datasets, samplers, DataLoader) and
``actorflow.utils.checkpoint``."""
from actorflow.utils import data  # noqa: F401
from actorflow.utils import checkpoint  # noqa: F401
