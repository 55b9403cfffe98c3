"""Three simplifications.

unread_outputs: an op's optional output (``Op.optional_outputs``: gelu's saved Phi(x) for its
gradient) that no op of the Job reads is switched off - the attr set to False and the output
dropped - so a forward-only Job computes no more than it needs and the op can join fusions,
which take single-output ops.

identity_elimination: removes ops that return their input unchanged - ops whose registry
record says so (``is_identity``) for a call whose output has its input's shape and dtype: a
``reshape`` or ``expand`` to the shape the tensor already has, a ``cast`` to its own dtype, a
``transpose`` by the identity permutation. Gradient rules emit many of these (a linear's
backward reshapes to 2-D what already is 2-D); in eager mode they are free views, in a Job they
would be copies.

Readers of the removed op's blob read its input instead. An op is kept when the blob it reads
or the blob it makes is written in place by some op (then the two must stay distinct memory),
and when it has control inputs or is a control input of another op.

cat_of_reshapes: a ``cat`` along the last axis whose inputs are reshapes, each read by the cat
alone and merging the trailing dims of inputs of one shape, ``cat_d(x_i.reshape(P + (q,)))``
with ``x_i`` of shape ``P + Q``, ``prod(Q) = q``, ``d = len(P)``, becomes
``cat_d(x_i.reshape(P + (1,) + Q)).reshape(P + (n q,))``: the same values in the same order.
Where the ``x_i`` are not contiguous (attention's head gradients, transposed back to
(batch, time, heads, head dim)), each old reshape was a copy and the cat another; now the
reshapes (a new axis) and the final reshape (of the cat's contiguous result) are views, and
the cat is the one copy. The final reshape takes the cat's name, so its readers are unchanged.
Ops of a global graph (tag ``global``) are left alone.
"""
from __future__ import annotations

from actorflow.job.job import BlobDesc, Job, OpConf, split_blob
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.passes.fuse_common import Namer, remap_train_blobs


def _is_identity(o, desc_of) -> bool:
    if len(o.inputs) != 1 or len(o.outputs) != 1 or desc_of[o.inputs[0]] != o.outputs[0]:
        return False
    is_identity = registry.get(o.op_type).is_identity
    return is_identity is not None and is_identity(o.attrs)


def eliminate_identities(job: Job) -> Job:
    """The pass (see the module docstring)."""
    desc_of = {o.out(i): d for o in job.ops for i, d in enumerate(o.outputs)}
    written: set = set()
    ctrl_targets: set = set()
    for o in job.ops:
        ctrl_targets.update(o.ctrl_inputs)
        if o.op_type in SYSTEM_OPS:
            continue
        op = registry.get(o.op_type)
        for i in op.mutated_inputs(len(o.inputs), o.attrs):
            if i < len(o.inputs):
                written.add(o.inputs[i])
    blob_map: dict = {}
    kept = []
    for o in job.ops:
        o.inputs = [blob_map.get(b, b) for b in o.inputs]
        if (o.op_type not in SYSTEM_OPS and _is_identity(o, desc_of)
                and not o.ctrl_inputs and o.name not in ctrl_targets
                and o.inputs[0] not in written and o.out(0) not in written):
            blob_map[o.out(0)] = o.inputs[0]
            continue
        kept.append(o)
    if not blob_map:
        return job
    job.ops = kept
    remap_train_blobs(job, blob_map)
    return job


def make_identity_elimination_pass(ctx):
    """The pass for any graph (it has nothing to configure)."""
    return eliminate_identities


def drop_unread_outputs(job: Job) -> Job:
    """The unread_outputs pass (see the module docstring)."""
    read = {b for o in job.ops for b in o.inputs}
    read.update(job.train.get("grads", {}).values())
    for o in job.ops:
        if o.op_type in SYSTEM_OPS:
            continue
        for attr, idx in registry.get(o.op_type).optional_outputs.items():
            if (o.attrs.get(attr) and idx == len(o.outputs) - 1
                    and o.out(idx) not in read):
                o.attrs = {**o.attrs, attr: False}
                o.outputs = o.outputs[:idx]
    return job


def make_unread_outputs_pass(ctx):
    """The pass for any graph (it has nothing to configure)."""
    return drop_unread_outputs


# the two ops cat_of_reshapes rewrites and emits (the pass is about them, as fuse_matmul's
# patterns are about "add")
_CAT = "cat"
_RESHAPE = "reshape"


def _merged_reshape(r, readers: dict, cat, desc_of) -> tuple | None:
    """(P + Q, P) when ``r`` is a plain reshape that only ``cat`` reads and whose output is its
    input with the trailing dims Q merged into the last one (``P + (prod(Q),)``), else None."""
    if (r.op_type != _RESHAPE or len(r.inputs) != 1 or r.ctrl_inputs or r.tags != cat.tags
            or readers.get(r.out(0)) != [cat.name]):
        return None
    src, out = tuple(desc_of[r.inputs[0]].shape), tuple(r.outputs[0].shape)
    d = len(out) - 1
    if d < 0 or len(src) <= d + 1 or src[:d] != out[:d]:
        return None
    q = 1
    for n in src[d:]:
        q *= n
    return (src, out[:d]) if q == out[d] else None


def stack_cat_of_reshapes(job: Job) -> Job:
    """The cat_of_reshapes pass (see the module docstring)."""
    desc_of = {o.out(i): d for o in job.ops for i, d in enumerate(o.outputs)}
    by_name = {o.name: o for o in job.ops}
    readers: dict = {}
    waited: set = set()
    for o in job.ops:
        waited.update(o.ctrl_inputs)
        for b in o.inputs:
            readers.setdefault(b, []).append(o.name)
    namer = Namer(job)
    new_ops: dict = {}  # cat name -> the ops to put in its place
    for c in job.ops:
        if (c.op_type != _CAT or len(c.inputs) < 2 or "global" in c.tags or c.ctrl_inputs
                or c.name in waited):
            continue
        out = tuple(c.outputs[0].shape)
        if c.attrs.get("dim") not in (len(out) - 1, -1):
            continue
        parts = [by_name.get(split_blob(b)[0]) for b in c.inputs]
        if any(p is None or split_blob(b)[1] != 0 for p, b in zip(parts, c.inputs)):
            continue
        shapes = [_merged_reshape(p, readers, c, desc_of) for p in parts]
        if None in shapes or len(set(shapes)) != 1 or len(set(c.inputs)) != len(c.inputs):
            continue
        src, prefix = shapes[0]
        d = len(prefix)
        dtype = c.outputs[0].dtype
        for p in parts:
            p.attrs = {**p.attrs, "shape": prefix + (1,) + src[d:]}
            p.outputs = [BlobDesc(prefix + (1,) + src[d:], p.outputs[0].dtype)]
        stacked = OpConf(namer(c.scope, _CAT), _CAT, list(c.inputs), {**c.attrs, "dim": d},
                         [BlobDesc(prefix + (len(parts),) + src[d:], dtype)], c.scope, [],
                         dict(c.tags))
        merged = OpConf(c.name, _RESHAPE, [stacked.out(0)], {"shape": out},
                        [BlobDesc(out, dtype)], c.scope, [], dict(c.tags))
        new_ops[c.name] = [stacked, merged]
    if not new_ops:
        return job
    job.ops = [x for o in job.ops for x in new_ops.get(o.name, (o,))]
    return job


def make_cat_of_reshapes_pass(ctx):
    """The pass for any graph (it has nothing to configure)."""
    return stack_cat_of_reshapes


__all__ = ["eliminate_identities", "make_identity_elimination_pass", "drop_unread_outputs",
           "make_unread_outputs_pass", "stack_cat_of_reshapes", "make_cat_of_reshapes_pass"]
