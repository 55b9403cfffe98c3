"""Job passes: functions Job -> Job, run in order by ``run_passes`` (which verifies the Job
after each). ``build_pipeline`` chooses the passes a Graph's config asks for. Most are pure
rewrites of the Job; the optimizer pass (with ZeRO's ``zero_updates``) traces instead: it runs
the optimizer's update code under a lazy interpreter, so it reads the graph's eager parameters
and optimizers through ``ctx`` (what acts during ``build``'s own trace, ZeRO stage 3's
parameter sharding and the micro-batch inputs, is in ``actorflow.nn.graph``).

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
    ("amp", "actorflow.passes.amp", "make_amp_pass"),
    ("gradient_accumulation", "actorflow.passes.grad_acc", "make_grad_acc_pass"),
    ("activation_checkpointing", "actorflow.passes.checkpointing", "make_checkpointing_pass"),
    ("constant_folding", "actorflow.passes.constant_folding", "make_constant_folding_pass"),
    ("identity_elimination", "actorflow.passes.simplify", "make_identity_elimination_pass"),
    ("unread_outputs", "actorflow.passes.simplify", "make_unread_outputs_pass"),
    ("fuse_matmul_bias_act", "actorflow.passes.fuse_matmul", "make_fuse_matmul_bias_act_pass"),
    ("fuse_add_to_output", "actorflow.passes.fuse_matmul", "make_fuse_add_to_output_pass"),
    ("fuse_elementwise", "actorflow.passes.fuse_elementwise", "make_fuse_elementwise_pass"),
    ("fuse_model_update", "actorflow.passes.fuse_update", "make_fuse_model_update_pass"),
    ("dead_op_elimination", "actorflow.passes.dce", "make_dead_op_elimination_pass"),
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
