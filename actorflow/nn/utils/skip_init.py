"""``skip_init``: build a module whose parameters the caller will overwrite."""
from __future__ import annotations


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameter values are unspecified (the caller
    overwrites them, e.g. from a checkpoint). As in PyTorch, the module is built on the meta
    device (so its initialisation computes nothing) and then given uninitialised memory on
    ``device`` (default cpu) with ``to_empty``; the class must accept a ``device`` keyword."""
    if not isinstance(module_cls, type):
        raise TypeError(f"skip_init: expected a Module class, got {module_cls!r}")
    final = kwargs.pop("device", None) or "cpu"
    return module_cls(*args, device="meta", **kwargs).to_empty(device=final)
