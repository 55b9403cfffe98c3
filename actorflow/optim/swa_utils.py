"""``flow.optim.swa_utils``: stochastic weight averaging, defined in
``actorflow.nn.optimizer.swa_utils`` (``AveragedModel`` is an ``nn.Module`` and ``nn`` is a
layer above ``optim``, so the names are looked up there when first asked for)."""
from __future__ import annotations

_NAMES = ("AveragedModel", "SWALR", "update_bn")


def __getattr__(name: str):
    if name in _NAMES:
        # late binding: nn (AveragedModel's Module) is a layer above optim
        from actorflow.nn.optimizer import swa_utils
        return getattr(swa_utils, name)
    raise AttributeError(f"module 'actorflow.optim.swa_utils' has no attribute '{name}'")
