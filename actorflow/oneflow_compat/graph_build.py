"""``oneflow.framework.graph_build_util`` and ``oneflow.framework.scope_util``: lazy mode and the
current scope as OneFlow code reads them, views over ``actorflow.scope`` and the lazy
interpreter (see the package docstring)."""
from __future__ import annotations

from dataclasses import dataclass

from actorflow import scope
from actorflow.dispatch.lazy import current_tracer


class lazy_mode:
    """Lazy (tracing) mode of this thread."""

    @staticmethod
    def is_enabled() -> bool:
        """True while a Graph's ``build`` is being traced on this thread."""
        return current_tracer() is not None

    class guard:
        """``with lazy_mode.guard(False):`` runs eagerly inside ``build``;
        ``guard(True)`` only checks that lazy mode is on (it can't be turned on without a
        graph being traced)."""

        def __init__(self, enabled: bool):
            self.enabled = bool(enabled)
            self._eager = None

        def __enter__(self):
            tracer = current_tracer()
            if self.enabled:
                if tracer is None:
                    raise RuntimeError("lazy_mode.guard(True): lazy mode is only on while an "
                                       "nn.Graph traces build(); call the graph instead")
                return self
            if tracer is not None:
                self._eager = scope.interpreter_scope(None)
                self._eager.__enter__()
            return self

        def __exit__(self, *exc):
            eager, self._eager = self._eager, None
            if eager is not None:
                eager.__exit__(*exc)
            return False


@dataclass(frozen=True)
class Scope:
    """Where ops are being created: ``path`` (``model.layers.0``), whether that code runs in
    a GraphModule with activation checkpointing on (its own or an enclosing one's), the
    innermost pipeline stage set with ``set_stage`` (or None), and whether lazy mode is on."""

    path: str
    checkpointing: bool
    stage_id: int | None
    is_lazy: bool


def current_scope() -> Scope:
    """The scope of the code running now (eager code gets the module path only)."""
    lazy = current_tracer() is not None
    return Scope(scope.current_path(), lazy and scope.checkpointing_path() is not None,
                 scope.stage_id(), lazy)


class AttrValue:
    """One attribute of a scope (the fields of OneFlow's AttrValue that apply)."""

    __slots__ = ("at_bool", "at_int64", "at_double", "at_string")

    def __init__(self, at_bool: bool = False, at_int64: int = 0, at_double: float = 0.0,
                 at_string: str = ""):
        self.at_bool, self.at_int64 = at_bool, at_int64
        self.at_double, self.at_string = at_double, at_string

    def __repr__(self) -> str:
        return (f"AttrValue(at_bool={self.at_bool}, at_int64={self.at_int64}, "
                f"at_string={self.at_string!r})")


class _AttrMap(dict):
    """A protobuf-like map: a missing attribute reads as the default value."""

    def __missing__(self, key):
        return AttrValue()


class ScopeProto:
    """A scope's attributes: ``attr_name2attr_value`` and the op-name prefixes (the module
    path split at dots)."""

    def __init__(self, s: Scope):
        self.attr_name2attr_value = _AttrMap()
        self.attr_name2attr_value["checkpointing"] = AttrValue(at_bool=s.checkpointing)
        if s.stage_id is not None:
            self.attr_name2attr_value["pipeline_stage_id_hint"] = AttrValue(at_int64=s.stage_id)
        self.scope_op_name_prefixes = [p for p in s.path.split(".") if p]
        self.module_name = s.path

    def __repr__(self) -> str:
        return (f"ScopeProto(module_name={self.module_name!r}, "
                f"attrs={dict(self.attr_name2attr_value)})")


def scope_to_proto(s: Scope) -> ScopeProto:
    """The attributes of scope ``s`` (from ``scope_util.current_scope()``)."""
    return ScopeProto(s)
