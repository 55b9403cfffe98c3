"""``flow.autocast`` (also ``flow.amp.autocast``): regions of eager mixed precision, and the
thread's autocast state functions under OneFlow's names.

A region names a device type, a low precision dtype, whether autocast is on in it and whether
casts of leaf weights are cached. Entering it saves the thread's state and sets the region's;
leaving it (also by an exception) restores what it replaced, so regions nest, a region may be
entered again while it is open (the same object, a recursive decorated function) and every
thread has its own state, as in OneFlow and PyTorch. As in OneFlow, the state is one switch
for the device type the innermost region names: ``autocast("cpu", enabled=False)`` (or a
disabled ``"cuda"`` region) inside a CPU region turns casting off until it ends.

What happens to each op while it is on is ``actorflow/dispatch/autocast.py``. actorflow runs on
the CPU: a ``"cuda"`` region that is enabled raises, as the other CUDA paths do
(``flow.cuda``).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from actorflow.dispatch import autocast as _state
from actorflow.framework import dtype as dt

__all__ = ["autocast", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype", "set_autocast_cpu_dtype", "set_autocast_gpu_dtype",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache"]


class autocast:
    """A region of mixed precision, as a context manager or a decorator.

    ``device_type``: ``"cpu"`` or ``"cuda"`` (raises when enabled: there is no CUDA device).
    ``dtype``: float16 or bfloat16; None takes the thread's dtype for the device type
    (``get_autocast_cpu_dtype()``, bfloat16 unless set). ``enabled``: whether casting is on in
    the region. ``cache_enabled``: whether a float32 leaf weight is cast once per region (None:
    the thread's ``is_autocast_cache_enabled()``).

    Inside, ops on the ``allow`` list (matmul, linear, convolutions) run in ``dtype``, ops on
    the ``deny`` list (losses, softmax, norms, reductions) in float32 and the others in the
    widest type of their inputs; wrap the forward pass and the loss, then call ``backward``
    outside (its ops run in the precisions of the forward ops they differentiate).
    """

    def __init__(self, device_type: str, dtype: Optional[dt.dtype] = None,
                 enabled: bool = True, cache_enabled: Optional[bool] = None):
        if device_type not in _state.DEVICE_TYPES:
            raise RuntimeError(f"autocast: device_type must be 'cuda' or 'cpu', got "
                               f"{device_type!r}")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        if enabled and device_type == "cuda":
            raise RuntimeError("autocast(device_type='cuda'): no CUDA device is available "
                               "(actorflow runs on the CPU only; flow.cuda.is_available() is "
                               "False); use device_type='cpu'")
        self.device = device_type
        if dtype is None:
            dtype = _state.get_cpu_dtype() if device_type == "cpu" else _state.get_gpu_dtype()
        self.fast_dtype = _state.check_low_dtype(f"autocast(device_type={device_type!r})", dtype)
        self.enabled = enabled
        self.cache_enabled = (_state.is_cache_enabled() if cache_enabled is None
                              else bool(cache_enabled))

    def __enter__(self) -> "autocast":
        _state.enter(self.device, self.fast_dtype, self.enabled, self.cache_enabled)
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        _state.leave()
        return False

    def __call__(self, func: Callable) -> Callable:
        """``func`` running inside this region at each call."""
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorate_autocast

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
                f"enabled={self.enabled}, cache_enabled={self.cache_enabled})")


def is_autocast_enabled() -> bool:
    """Whether autocast is on for this thread (for the device type of its innermost region)."""
    return _state.is_enabled()


def set_autocast_enabled(enabled: bool) -> None:
    """Turn this thread's autocast on or off, keeping its device type (``"cuda"`` outside any
    region, as in OneFlow: CPU tensors are then not cast)."""
    _state.set_enabled(enabled)


def get_autocast_cpu_dtype() -> dt.dtype:
    """The CPU autocast dtype of this thread: bfloat16 unless set."""
    return _state.get_cpu_dtype()


def get_autocast_gpu_dtype() -> dt.dtype:
    """The CUDA autocast dtype of this thread: float16 unless set."""
    return _state.get_gpu_dtype()


def set_autocast_cpu_dtype(dtype: dt.dtype) -> None:
    """Set the CPU autocast dtype of this thread (float16 or bfloat16)."""
    _state.set_cpu_dtype(dtype)


def set_autocast_gpu_dtype(dtype: dt.dtype) -> None:
    """Set the CUDA autocast dtype of this thread (float16 or bfloat16)."""
    _state.set_gpu_dtype(dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether this thread caches the casts of leaf weights (True unless set)."""
    return _state.is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn this thread's cache of leaf weight casts on or off."""
    _state.set_cache_enabled(enabled)


def clear_autocast_cache() -> None:
    """Forget the casts this thread cached."""
    _state.clear_cache()
