"""dead_op_elimination: removes ops whose results nothing observable needs.

Kept (roots): ``output``, ``input`` and ``variable`` ops (the graph's interface and state), ops
without outputs or writing an input in place (updates, ``assign``, batch-norm running stats),
and random ops - the executor draws one seed per random op in Job order, so removing one would
shift the seeds of the random ops after it and break "same seed, same numbers". Everything a
kept op reads, transitively, is kept too. Control edges do not keep an op alive: a live op's
control edge on a removed op is replaced by the removed op's own control inputs (resolved to
live ops), so orderings through it survive. ``job.train["grads"]`` entries for removed blobs go.

Cost: linear in the number of ops and edges.
"""
from __future__ import annotations

from actorflow.job.job import Job, OpConf, split_blob
from actorflow.job.system_ops import system_op
from actorflow.ops import registry
from actorflow.passes.fuse_common import remap_train_blobs

def is_root(o: OpConf) -> bool:
    """``o`` must stay whether or not anything reads it."""
    if o.tags.get("keep"):  # (a collective other ranks' reads depend on: lazy_move.py)
        return True
    row = system_op(o.op_type)
    if row is not None:
        return row.dce_root or not o.outputs
    if not o.outputs:
        return True
    op = registry.get(o.op_type)
    return op.random or op.transfer or bool(op.mutated_inputs(len(o.inputs), o.attrs))


def eliminate_dead_ops(job: Job) -> Job:
    """The pass (see the module docstring)."""
    live: set = set()
    for o in reversed(job.ops):  # readers come after producers: one backward sweep suffices
        if o.name in live or is_root(o):
            live.add(o.name)
            for b in o.inputs:
                live.add(split_blob(b)[0])
    if len(live) == len(job.ops):
        return job
    dead_ctrl: dict = {}  # dead op -> its control inputs, resolved to live ops
    out = []
    for o in job.ops:  # control inputs come earlier, so they are resolved before they are used
        if o.name in live and all(c in live for c in o.ctrl_inputs):
            out.append(o)
            continue
        ctrl: dict = {}
        for c in o.ctrl_inputs:
            if c in live:
                ctrl[c] = None
            else:
                ctrl.update(dict.fromkeys(dead_ctrl[c]))
        if o.name in live:
            o.ctrl_inputs = list(ctrl)
            out.append(o)
        else:
            dead_ctrl[o.name] = list(ctrl)
    job.ops = out
    remap_train_blobs(job, {})
    return job


def make_dead_op_elimination_pass(ctx):
    """The dead_op_elimination pass (on unless disabled)."""
    return eliminate_dead_ops
