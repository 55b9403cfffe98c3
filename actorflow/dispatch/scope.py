"""The module path of the op being called (``model.layers.0.attn``), for errors and op names.

``nn.Module.__call__`` pushes its name while its forward runs; ``nn.Graph`` pushes the
attribute names of its proxies. Kept per Python thread.
"""
from __future__ import annotations

import threading


class _Scope(threading.local):
    def __init__(self):
        self.names: list = []


_scope = _Scope()


def push(name: str) -> None:
    _scope.names.append(name)


def pop() -> None:
    _scope.names.pop()


def current_path() -> str:
    return ".".join(n for n in _scope.names if n)


class module_scope:
    """Context manager: ops called inside are attributed to ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        _scope.names.append(self.name)

    def __exit__(self, *exc):
        _scope.names.pop()
        return False
