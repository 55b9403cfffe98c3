"""``skip_init``: build a module whose parameters the caller will overwrite."""
from __future__ import annotations


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameter values are unspecified (the caller
    overwrites them, e.g. from a checkpoint). Like PyTorch, the class must accept a ``device``
    keyword; actorflow builds on the CPU and runs the usual initialisation (it has no meta
    device to skip it on)."""
    if not isinstance(module_cls, type):
        raise TypeError(f"skip_init: expected a Module class, got {module_cls!r}")
    kwargs.setdefault("device", "cpu")
    return module_cls(*args, **kwargs)
