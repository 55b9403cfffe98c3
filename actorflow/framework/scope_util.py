"""The current op scope as OneFlow code reads it (``oneflow.framework.scope_util``): the
module path ops are attributed to, and the graph options of the modules being called
(activation checkpointing, pipeline stage)."""
from __future__ import annotations

from dataclasses import dataclass


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
    from actorflow.dispatch import scope
    from actorflow.job import builder
    from actorflow.nn.graph.proxy import current_graph_modules

    stage = None
    for gm in current_graph_modules():
        if gm.stage_id is not None:
            stage = gm.stage_id
    lazy = builder.current_builder() is not None
    return Scope(scope.current_path(), lazy and builder.checkpointing_path() is not None,
                 stage, lazy)


__all__ = ["Scope", "current_scope"]
