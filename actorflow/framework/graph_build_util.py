"""Graph-building state as OneFlow code reads it (``oneflow.framework.graph_build_util``):
whether lazy mode (a Graph's ``build`` being traced) is on, and a scope's attributes.

``lazy_mode.is_enabled()`` is true while a ``JobBuilder`` traces on this thread;
``lazy_mode.guard(False)`` runs its body eagerly inside ``build`` (ops there compute values and
add nothing to the Job). ``scope_to_proto(scope)`` gives a scope's attributes
(``attr_name2attr_value["checkpointing"].at_bool``...) in the shape of OneFlow's scope proto.
"""
from __future__ import annotations

from actorflow.job import builder as _builder


class lazy_mode:
    """Lazy (tracing) mode of this thread."""

    @staticmethod
    def is_enabled() -> bool:
        """True while a Graph's ``build`` is being traced on this thread."""
        return _builder.current_builder() is not None

    class guard:
        """``with lazy_mode.guard(False):`` runs eagerly inside ``build``;
        ``guard(True)`` only checks that lazy mode is on (it can't be turned on without a
        graph being traced)."""

        def __init__(self, enabled: bool):
            self.enabled = bool(enabled)
            self._suspended = None

        def __enter__(self):
            from actorflow.dispatch import pop_interpreter

            b = _builder.current_builder()
            if self.enabled:
                if b is None:
                    raise RuntimeError("lazy_mode.guard(True): lazy mode is only on while an "
                                       "nn.Graph traces build(); call the graph instead")
                return self
            if b is not None:
                pop_interpreter(b)
                _builder._local.builder = None
                self._suspended = b
            return self

        def __exit__(self, *exc):
            from actorflow.dispatch import push_interpreter

            b = self._suspended
            if b is not None:
                self._suspended = None
                _builder._local.builder = b
                push_interpreter(b)
            return False


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

    def __init__(self, scope):
        self.attr_name2attr_value = _AttrMap()
        self.attr_name2attr_value["checkpointing"] = AttrValue(at_bool=scope.checkpointing)
        if scope.stage_id is not None:
            self.attr_name2attr_value["pipeline_stage_id_hint"] = AttrValue(
                at_int64=scope.stage_id)
        self.scope_op_name_prefixes = [p for p in scope.path.split(".") if p]
        self.module_name = scope.path

    def __repr__(self) -> str:
        return (f"ScopeProto(module_name={self.module_name!r}, "
                f"attrs={dict(self.attr_name2attr_value)})")


def scope_to_proto(scope) -> ScopeProto:
    """The attributes of ``scope`` (from ``scope_util.current_scope()``)."""
    return ScopeProto(scope)


__all__ = ["lazy_mode", "scope_to_proto", "ScopeProto", "AttrValue"]
