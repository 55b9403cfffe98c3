"""``oneflow.nn.modules.batchnorm``: OneFlow's module path of the batch norms, which live in
``normalization.py`` here."""
from actorflow.nn.modules.normalization import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm)

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
