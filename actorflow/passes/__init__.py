"""Job passes: pure functions Job -> Job, run in order by ``run_passes`` (which verifies the
Job after each). ``build_pipeline`` chooses the passes a Graph's config asks for."""
from __future__ import annotations

from actorflow.passes.manager import diff_jobs, run_passes
from actorflow.passes.optimizer import make_optimizer_pass


def build_pipeline(config, ctx) -> list:
    """``[(name, pass)]`` for a graph with ``config`` (a GraphConfig) and pass context ``ctx``."""
    pipeline = []
    if config.pass_enabled("optimizer") and ctx.optimizers:
        pipeline.append(("optimizer", make_optimizer_pass(ctx)))
    return pipeline


__all__ = ["run_passes", "diff_jobs", "build_pipeline", "make_optimizer_pass"]
