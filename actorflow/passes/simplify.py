"""Two simplifications.

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
"""
from __future__ import annotations

from actorflow.job.job import Job
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.passes.fuse_common import remap_train_blobs


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


__all__ = ["eliminate_identities", "make_identity_elimination_pass", "drop_unread_outputs",
           "make_unread_outputs_pass"]
