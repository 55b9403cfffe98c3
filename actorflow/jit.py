"""``flow.jit``: PyTorch's TorchScript decorators, accepted and ignored, as OneFlow does (a
model is compiled here with ``nn.Graph``, not by scripting)."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["script", "trace", "ignore", "unused", "is_scripting", "is_tracing"]


def script(obj: Any, optimize=None, _frames_up: int = 0, _rcb=None,
           example_inputs=None) -> Any:
    """Returns ``obj`` unchanged (no TorchScript here)."""
    return obj


def trace(func: Callable, example_inputs=None, *args, **kwargs) -> Callable:
    """Returns ``func`` unchanged (no TorchScript here)."""
    return func


def ignore(drop: Any = False, **kwargs) -> Any:
    """``@ignore`` or ``@ignore(drop=...)``: the function itself."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn: Callable) -> Callable:
    """The function itself."""
    return fn


def is_scripting() -> bool:
    """False: code never runs as TorchScript here."""
    return False


def is_tracing() -> bool:
    """False: code never runs under a TorchScript trace here."""
    return False
