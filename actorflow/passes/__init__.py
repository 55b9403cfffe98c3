"""Job passes: pure functions Job -> Job, run in order by ``run_passes`` (which verifies the
Job after each). ``build_pipeline`` chooses the passes a Graph's config asks for.

Each entry of ``PASSES`` names a pass (the name ``GraphConfig.disable_pass`` takes) and a
factory ``make(ctx)`` that returns the pass function, or None when the pass has nothing to do
for this graph (no optimizer, AMP off ...). ``ctx`` carries the graph's config, optimizers,
variable bindings (variable op name -> eager tensor; a pass that adds variables adds them here)
and a namer for new state.
"""
from __future__ import annotations

import importlib

from actorflow.passes.manager import diff_jobs, run_passes

# (name, module, factory) in the order the passes run
PASSES = [
    ("optimizer", "actorflow.passes.optimizer", "make_optimizer_pass"),
]


def build_pipeline(config, ctx) -> list:
    """``[(name, pass)]`` for a graph with ``config`` (a GraphConfig) and pass context ``ctx``."""
    pipeline = []
    for name, module, factory in PASSES:
        if not config.pass_enabled(name):
            continue
        fn = getattr(importlib.import_module(module), factory)(ctx)
        if fn is not None:
            pipeline.append((name, fn))
    return pipeline


__all__ = ["run_passes", "diff_jobs", "build_pipeline", "PASSES"]
