"""Utilities: ``actorflow.utils.data`` (datasets, samplers, DataLoader)."""
from actorflow.utils import data  # noqa: F401
