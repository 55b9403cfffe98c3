"""fuse_clip_grad (on with fuse_model_update; off with ``config.disable_pass("fuse_clip_grad")``
or with fuse_model_update off): gradient clipping by norm folded into the update that reads the
clipped gradients.

A param group with ``clip_grad_max_norm`` emits ``grad_norm`` over its gradients, then a
``clip_grad_by_norm(g, norm)`` per gradient, scaling it in place, then the updates reading
``g``. The pass knows the clip by its record's trait ``grad_scale`` (an op that only scales its
input 0 in place by a factor of its other one-element inputs). Each such op whose gradient
nothing reads after it but one update op or ``multi_tensor_update`` goes, and that update
becomes a ``multi_tensor_update`` with attrs ``grad_scale`` (the op), ``grad_scale_attrs``,
``grad_scale_inputs`` and ``grad_scale_params`` (its members whose gradient was scaled), the
op's other inputs (the total norm) last (``ops/fused.py``): it scales those gradients itself -
its NumPy kernel with the scale op's own kernel, its generated loop
(``compiler/codegen/update.py``) as a factor on each gradient element it loads. A lone update
op becomes a one-member ``multi_tensor_update``.

What stays: a clip whose gradient another op reads after it (the clipped value is observed),
a clip of a gradient read twice by the update or by several updates, clips of another kind,
norm or max_norm than the update's first folded one, and distributed graphs' ops
(``tags["global"]``).
Ops reading the gradient BEFORE the clip (a gradient the graph returns, the norm itself) read
the unclipped value either way: the clip's control edges on them move to the update, which
then still runs after them.
"""
from __future__ import annotations

from actorflow.job.job import Job, OpConf
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.passes.fuse_common import JobIndex, attrs_key, rewrite


def _grad_positions(o: OpConf) -> list:
    """The input positions of the gradients an update op or ``multi_tensor_update`` reads."""
    if o.op_type == "multi_tensor_update":
        arity = o.attrs["arity"]
        return [1 + m * arity + 1 for m in range((len(o.inputs) - 1) // arity)]
    return [1]


def _is_update(o: OpConf) -> bool:
    if o.op_type in SYSTEM_OPS or o.tags.get("global") or o.outputs:
        return False
    if o.op_type == "multi_tensor_update":
        return "grad_scale" not in o.attrs
    return registry.get(o.op_type).optimizer_update and len(o.inputs) >= 3


def _is_scale(o: OpConf) -> bool:
    return (o.op_type not in SYSTEM_OPS and registry.get(o.op_type).grad_scale is not None
            and not o.outputs and len(o.inputs) >= 2)


def _foldable(index: JobIndex, clip: OpConf, update: OpConf) -> bool:
    """Whether ``clip``'s gradient is read after ``clip`` by ``update`` alone, once, and
    nothing writes it but ``clip``."""
    g = clip.inputs[0]
    at = index.pos[clip.name]
    if clip.tags.get("global") or update.inputs.count(g) != 1 or index.pos[update.name] < at:
        return False
    for r in index.readers(g):
        if r in (clip.name, update.name):
            continue
        o = index.by_name[r]
        if index.pos[r] > at:
            return False  # it would see the clipped gradient
        if o.op_type not in SYSTEM_OPS and any(
                o.inputs[i] == g for i in registry.get(o.op_type).mutated_inputs(
                    len(o.inputs), o.attrs)):
            return False  # another writer of the gradient
    return index.readers(g).count(clip.name) == 1


def _scaling_update(update: OpConf, scale: OpConf, members: list) -> OpConf:
    """``update`` as a ``multi_tensor_update`` that scales the gradients of ``members`` as
    ``scale`` (one of the ops it replaces) did."""
    if update.op_type == "multi_tensor_update":
        inputs, attrs = list(update.inputs), dict(update.attrs)
    else:
        inputs = [update.inputs[2]] + update.inputs[:2] + update.inputs[3:]
        attrs = {"update": update.op_type, "update_attrs": dict(update.attrs),
                 "arity": len(update.inputs) - 1}
    rest = list(scale.inputs[1:])
    attrs.update(grad_scale=scale.op_type, grad_scale_attrs=dict(scale.attrs),
                 grad_scale_inputs=len(rest), grad_scale_params=sorted(members))
    name = update.name if update.op_type == "multi_tensor_update" else \
        f"{update.name}-clipped"
    return OpConf(name, "multi_tensor_update", inputs + rest, attrs, [], update.scope,
                  [], dict(update.tags))


def fuse_clip_grad(job: Job) -> Job:
    """The pass (see the module docstring)."""
    index = JobIndex(job)
    clip_of: dict = {}  # gradient blob -> the grad_scale ops (clips) writing it
    for o in job.ops:
        if _is_scale(o):
            clip_of.setdefault(o.inputs[0], []).append(o)
    if not clip_of:
        return job
    used = {o.name for o in job.ops}
    replacements = []
    for u in job.ops:
        if not _is_update(u):
            continue
        key, members, folded = None, [], []  # key: the first folded clip's kind and inputs
        for m, pos in enumerate(_grad_positions(u)):
            found = clip_of.get(u.inputs[pos], [])
            if len(found) != 1 or not _foldable(index, found[0], u):
                continue
            c = found[0]
            k = (c.op_type, tuple(c.inputs[1:]), attrs_key(c.attrs))
            if key is None:
                key = k
            if k != key:
                continue
            members.append(m)
            folded.append(c)
        if not members:
            continue
        conf = _scaling_update(u, folded[0], members)
        while conf.name != u.name and conf.name in used:
            conf.name += "_"
        used.add(conf.name)
        folded.sort(key=lambda c: index.pos[c.name])
        replacements.append(([c.name for c in folded] + [u.name], conf, {}))
    return rewrite(job, replacements)


def make_fuse_clip_grad_pass(ctx):
    """The pass, unless fuse_model_update is off (``config.allow_fuse_model_update_ops(False)``
    or ``disable_pass("fuse_model_update")``): the clip joins the fused update."""
    config = ctx.config
    if not config.fuse_model_update_ops or not config.pass_enabled("fuse_model_update"):
        return None
    registry.get("multi_tensor_update")  # the fused op is registered
    return fuse_clip_grad


__all__ = ["fuse_clip_grad", "make_fuse_clip_grad_pass"]
