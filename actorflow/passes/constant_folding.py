"""constant_folding: ops whose value is known when the graph compiles become ``literal`` ops.

Constant are ``literal`` ops, registered ops without inputs (``constant`` - zeros, ones, full -,
``arange``, ``linspace``, ``eye``), and ops all of whose inputs are constant. Never constant:
variables (their values change between runs), inputs, random ops (they draw a new seed every
run), ops that write an input in place, and ops with control inputs. A constant op is evaluated
with its own kernel, once, at compile time; each of its outputs that a non-constant op (or a
graph output) reads becomes a ``literal`` holding the array (output 0 keeps the op's name, so
readers are unchanged). Values larger than ``MAX_LITERAL_BYTES`` are not folded, so the Job stays
small: such an op stays, reading literals.

Cost: one walk over the Job; each folded op runs its kernel once.
"""
from __future__ import annotations

import numpy as np

from actorflow.job.job import Job, OpConf, split_blob
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.passes.fuse_common import Namer, remap_train_blobs

MAX_LITERAL_BYTES = 1 << 20  # 1 MiB per folded value


def _foldable(o: OpConf, constant: dict, max_bytes: int, written: set) -> bool:
    if o.op_type in SYSTEM_OPS or o.ctrl_inputs or not o.outputs:
        return False
    if any(o.out(i) in written for i in range(len(o.outputs))):
        return False  # a literal is shared by every run: nothing may write into it
    op = registry.get(o.op_type)
    if op.random or op.transfer or op.kernel_cpu is None:
        return False
    if op.mutated_inputs(len(o.inputs), o.attrs):
        return False
    if any(d.nbytes() > max_bytes for d in o.outputs):
        return False
    return all(b in constant for b in o.inputs)


def _written_blobs(job: Job) -> set:
    """Blobs some op writes in place."""
    written = set()
    for o in job.ops:
        if o.op_type not in SYSTEM_OPS:
            for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
                written.add(o.inputs[i])
    return written


def fold_constants(job: Job, max_bytes: int = MAX_LITERAL_BYTES) -> Job:
    """The pass (see the module docstring)."""
    value: dict = {}    # blob -> array, for constant blobs
    folded: set = set()
    written = _written_blobs(job)
    for o in job.ops:
        if o.op_type == "literal":
            value[o.out(0)] = o.attrs["value"]
        elif _foldable(o, value, max_bytes, written):
            outs = [np.empty(d.shape, d.dtype.np) for d in o.outputs]
            try:
                registry.get(o.op_type).kernel_cpu([value[b] for b in o.inputs], outs, o.attrs)
            except Exception:  # noqa: BLE001 - an op that fails now fails when the graph runs
                continue
            folded.add(o.name)
            for i, a in enumerate(outs):
                value[o.out(i)] = a
    if not folded:
        return job
    used: set = set()  # folded outputs that ops staying in the Job read
    for o in job.ops:
        if o.name not in folded:
            used.update(b for b in o.inputs if split_blob(b)[0] in folded)
    namer = Namer(job)
    blob_map: dict = {}
    literal_of: dict = {}  # folded op -> the literal that takes its place in control edges
    out = []
    for o in job.ops:
        if o.name not in folded:
            o.inputs = [blob_map.get(b, b) for b in o.inputs]
            ctrl = []
            for c in o.ctrl_inputs:
                if c in folded:
                    c = literal_of.get(c)
                if c is not None and c not in ctrl:
                    ctrl.append(c)
            o.ctrl_inputs = ctrl
            out.append(o)
            continue
        for i, d in enumerate(o.outputs):
            blob = o.out(i)
            if blob not in used:
                continue
            name = o.name if i == 0 else namer(o.scope, "literal")
            lit = OpConf(name, "literal", [], {"value": value[blob]}, [d], o.scope, [],
                         dict(o.tags))
            blob_map[blob] = lit.out(0)
            literal_of.setdefault(o.name, name)
            out.append(lit)
    job.ops = out
    remap_train_blobs(job, blob_map)
    return job


def make_constant_folding_pass(ctx):
    """The constant_folding pass (on unless ``config.disable_pass("constant_folding")``)."""
    return fold_constants
