"""The current scope: where on this thread ops are being created, in one thread-local.

It holds
  * ``names``: the module path parts (``model``, ``layers.0`` ...) ops are attributed to, for
    error messages, op names in a Job and the module of a backward op;
  * ``modules``: the ``nn.Module`` objects whose forward is running, innermost last;
  * ``graph_modules``: the ``GraphModule`` options (stage, activation checkpointing) of the
    graph proxies being called while a Graph traces;
  * ``interpreter``: the interpreter that takes every op call on this thread when it is not
    the eager-local one (a Graph's tracer, see ``actorflow.dispatch.lazy``), else None;
  * ``global_mode``: ``(placement, sbp tuple)`` while ``flow.utils.global_view.global_mode``
    is on (creation ops then make global tensors of them), else None.

Everything that asks "where are we" (dispatch, autograd, nn.Module, graph proxies, the OneFlow
compatibility surface) reads this module; nothing keeps a second stack.
"""
from __future__ import annotations

import threading


class _State(threading.local):
    def __init__(self):
        self.names: list = []
        self.modules: list = []
        self.graph_modules: list = []
        self.interpreter = None
        self.global_mode = None


state = _State()


def push(name: str) -> None:
    """Ops created until the matching ``pop`` belong to module ``name`` (inside the current)."""
    state.names.append(name)


def pop() -> None:
    state.names.pop()


def current_path() -> str:
    """The dotted module path of the code running now (``""`` outside any module)."""
    return ".".join(n for n in state.names if n)


class module_scope:
    """Context manager: ops called inside are attributed to ``name``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        state.names.append(self.name)

    def __exit__(self, *exc):
        state.names.pop()
        return False


class graph_module_scope:
    """Context manager for a graph proxy's call: the op path is ``path`` (the module's full
    path, however the module was reached), ``module`` and ``graph_module`` are pushed."""

    __slots__ = ("path", "module", "graph_module", "_saved")

    def __init__(self, path: str, module, graph_module):
        self.path, self.module, self.graph_module = path, module, graph_module

    def __enter__(self):
        self._saved = state.names
        state.names = [self.path]
        state.modules.append(self.module)
        state.graph_modules.append(self.graph_module)

    def __exit__(self, *exc):
        state.graph_modules.pop()
        state.modules.pop()
        state.names = self._saved
        return False


def checkpointing_path() -> str | None:
    """The outermost graph module being called with activation checkpointing on, if any."""
    for gm in state.graph_modules:
        if gm.activation_checkpointing:
            return gm.path
    return None


def stage_id() -> int | None:
    """The innermost pipeline stage set with ``GraphModule.set_stage`` being called, if any."""
    for gm in reversed(state.graph_modules):
        if gm.stage_id is not None:
            return gm.stage_id
    return None


def global_mode():
    """``(placement, sbp tuple)`` of the global mode on this thread, or None when it is off."""
    return state.global_mode


def current_interpreter():
    """The interpreter taking this thread's op calls, or None for eager-local."""
    return state.interpreter


class interpreter_scope:
    """Context manager: op calls on this thread go to ``interp`` (None: eager-local) inside;
    the previous interpreter is restored on exit."""

    __slots__ = ("interp", "_saved")

    def __init__(self, interp):
        self.interp = interp

    def __enter__(self):
        self._saved = state.interpreter
        state.interpreter = self.interp
        return self.interp

    def __exit__(self, *exc):
        state.interpreter = self._saved
        return False
