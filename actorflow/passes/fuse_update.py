"""fuse_model_update (on by default; off with ``config.allow_fuse_model_update_ops(False)`` or
``config.disable_pass("fuse_model_update")``): the per-parameter update ops
(registry trait ``optimizer_update``: inputs ``(param, grad, lr, [step], state...)``, no outputs)
of one kind with equal attrs, the same learning-rate blob and the same tags become one
``multi_tensor_update`` op, which runs the update op's kernel for each parameter in the original
order (the same bits).

The fused op takes the place of the last update of its run. A run ends before an update that
comes after an op depending on an earlier member (e.g. a read of an updated parameter): moving
that member later would change what the op sees.
"""
from __future__ import annotations

from actorflow.job.job import Job, OpConf
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.passes.fuse_common import JobIndex, Namer, attrs_key, rewrite, tags_key


def _is_update(o: OpConf) -> bool:
    return o.op_type not in SYSTEM_OPS and registry.get(o.op_type).optimizer_update


def fuse_model_update(job: Job) -> Job:
    """The pass (see the module docstring)."""
    index = JobIndex(job)
    runs: dict = {}    # key -> the open run: [members, min position of outside dependents]
    done = []
    for q, o in enumerate(job.ops):
        if not _is_update(o) or o.outputs or len(o.inputs) < 3:
            continue
        key = (o.op_type, attrs_key(o.attrs), o.inputs[2], tags_key(o), len(o.inputs))
        run = runs.get(key)
        if run is not None and run[1] <= q:
            done.append(run[0])
            run = None
        if run is None:
            run = runs[key] = [[], len(job.ops)]
        run[0].append(o)
        names = {m.name for m in run[0]}
        for d in index.dependents.get(o.name, ()):
            if d not in names:
                run[1] = min(run[1], index.pos[d])
    done.extend(r[0] for r in runs.values())
    namer = Namer(job)
    replacements = []
    for members in sorted(done, key=lambda ms: index.pos[ms[-1].name]):
        if len(members) < 2:
            continue
        first = members[0]
        inputs = [first.inputs[2]]
        for m in members:
            inputs.extend(m.inputs[:2] + m.inputs[3:])
        attrs = {"update": first.op_type, "update_attrs": dict(first.attrs),
                 "arity": len(first.inputs) - 1}
        last = members[-1]
        conf = OpConf(namer(last.scope, "multi_tensor_update"), "multi_tensor_update", inputs,
                      attrs, [], last.scope, [], dict(last.tags))
        replacements.append(([m.name for m in members], conf, {}))
    return rewrite(job, replacements)


def make_fuse_model_update_pass(ctx):
    """The pass, unless ``config.allow_fuse_model_update_ops(False)`` switched it off."""
    if not ctx.config.fuse_model_update_ops:
        return None
    registry.get("multi_tensor_update")  # the fused op is registered
    return fuse_model_update
