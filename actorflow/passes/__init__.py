"""Job passes: functions Job -> Job, run in order by ``run_passes`` (which verifies the Job
after each). ``build_pipeline`` chooses the passes a Graph's config asks for. The passes here
rewrite the Job; none traces. The one step of the list that traces, the optimizer's update
ops (run through the optimizer's own code under a lazy interpreter, with ZeRO's rerouting),
is ``actorflow.nn.graph.optimizer_emission``: its entry names no module, and the caller hands
its factory to ``build_pipeline`` (``provided``). Where a pass adds traced computation
(gradient accumulation's ``1 / n`` on the seed gradients) it calls ``ctx.emit_after``, which
nn.Graph provides too.

Each entry of ``PASSES`` names a pass (the name ``GraphConfig.disable_pass`` takes) and a
factory ``make(ctx)`` that returns the pass function, or None when the pass has nothing to do
for this graph (no optimizer, AMP off ...). ``ctx`` carries the graph's config, optimizers,
variable bindings (variable op name -> eager tensor; a pass that adds variables adds them here)
and a namer for new state.
"""
from __future__ import annotations

import importlib

from actorflow.passes.manager import diff_jobs, run_passes

# (name, module, factory) in the order the passes run; module None: the caller provides it
PASSES = [
    ("optimizer", None, None),  # nn.graph.optimizer_emission.make_optimizer_pass
    ("amp", "actorflow.passes.amp", "make_amp_pass"),
    ("gradient_accumulation", "actorflow.passes.grad_acc", "make_grad_acc_pass"),
    ("activation_checkpointing", "actorflow.passes.checkpointing", "make_checkpointing_pass"),
    ("constant_folding", "actorflow.passes.constant_folding", "make_constant_folding_pass"),
    ("identity_elimination", "actorflow.passes.simplify", "make_identity_elimination_pass"),
    ("unread_outputs", "actorflow.passes.simplify", "make_unread_outputs_pass"),
    ("cat_of_reshapes", "actorflow.passes.simplify", "make_cat_of_reshapes_pass"),
    ("fuse_matmul_bias_act", "actorflow.passes.fuse_matmul", "make_fuse_matmul_bias_act_pass"),
    ("fuse_add_to_output", "actorflow.passes.fuse_matmul", "make_fuse_add_to_output_pass"),
    ("fuse_elementwise", "actorflow.passes.fuse_elementwise", "make_fuse_elementwise_pass"),
    ("fuse_model_update", "actorflow.passes.fuse_update", "make_fuse_model_update_pass"),
    ("fuse_clip_grad", "actorflow.passes.fuse_clip_grad", "make_fuse_clip_grad_pass"),
    ("dead_op_elimination", "actorflow.passes.dce", "make_dead_op_elimination_pass"),
]


def build_pipeline(config, ctx, provided: dict | None = None) -> list:
    """``[(name, pass)]`` for a graph with ``config`` (a GraphConfig) and pass context ``ctx``;
    ``provided`` maps the name of each entry without a module to its factory."""
    pipeline = []
    for name, module, factory in PASSES:
        if not config.pass_enabled(name):
            continue
        if module is None:
            make = (provided or {}).get(name)
            if make is None:
                raise ValueError(f"build_pipeline: pass {name!r} is provided by the caller "
                                 f"(nn.Graph); pass its factory in provided={{{name!r}: ...}}")
            fn = make(ctx)
        else:
            fn = getattr(importlib.import_module(module), factory)(ctx)
        if fn is not None:
            pipeline.append((name, fn))
    return pipeline


__all__ = ["run_passes", "diff_jobs", "build_pipeline", "PASSES"]
