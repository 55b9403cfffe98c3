"""Activation checkpointing: forward ops of modules with ``activation_checkpointing = True`` are
recomputed during backward instead of keeping their outputs alive.

While tracing, ops called inside such a module are tagged ``tags["checkpointing"] = path``
(the outermost checkpointed module). For each such segment the pass

1. finds the blobs the segment's forward ops produce that backward ops read;
2. leaves out blobs that stay alive anyway: a segment's inputs (the checkpoints another
   segment's recomputation reads) and blobs that output or optimizer ops read;
3. clones the forward ops that produce the rest (transitively, stopping at the segment's
   inputs, at variables and at ops that write an input in place, whose outputs are kept), in
   their forward order, just before the first backward op that reads one of those blobs;
4. makes the backward readers read the clones.

The original intermediates are then read only by forward ops and die after the forward (see
``actorflow.job.memory``). A clone is tagged ``phase = backward`` and ``recompute_of`` (its
original's name); a clone of a random op also gets ``seed_of``, so it draws the same seed and
the numbers are bit-identical to the graph without checkpointing.
"""
from __future__ import annotations

from actorflow.job.job import Job, split_blob, unique_name
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry


def make_checkpointing_pass(ctx):
    """The activation-checkpointing pass (a no-op on a Job without checkpointed modules or
    without backward ops)."""

    def activation_checkpointing_pass(job: Job) -> Job:
        return recompute_checkpointed(job)

    return activation_checkpointing_pass


def _recomputable(o) -> bool:
    if o.op_type in SYSTEM_OPS or o.tags.get("phase") != "forward":
        return False
    return not registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs)


def recompute_checkpointed(job: Job) -> Job:
    """``job`` with checkpointed segments recomputed in backward (see the module docstring)."""
    segments: dict = {}
    for o in job.ops:
        path = o.tags.get("checkpointing")
        if path is not None and o.tags.get("phase") == "forward":
            segments.setdefault(path, set()).add(o.name)
    backward = [o for o in job.ops if o.tags.get("phase") == "backward"]
    if not segments or not backward:
        return job
    producer = {o.name: o for o in job.ops}

    def read_by_backward(seg: set) -> set:
        return {b for o in backward for b in o.inputs if split_blob(b)[0] in seg}

    def clone_set(seg: set, wanted: set) -> set:
        need, stack = set(), [split_blob(b)[0] for b in wanted]
        while stack:
            name = stack.pop()
            o = producer[name]
            if name in need or name not in seg or not _recomputable(o):
                continue
            need.add(name)
            stack.extend(split_blob(b)[0] for b in o.inputs)
        return need

    def boundary(need: set) -> set:
        return {b for n in need for b in producer[n].inputs if split_blob(b)[0] not in need}

    # blobs alive through backward anyway: segment inputs and blobs non-forward,
    # non-backward ops (outputs, optimizer) read
    kept = set()
    for seg in segments.values():
        kept |= boundary(clone_set(seg, read_by_backward(seg)))
    for o in job.ops:
        if o.tags.get("phase") not in ("forward", "backward"):
            kept.update(o.inputs)
    position = {o.name: i for i, o in enumerate(job.ops)}
    insert_before: dict = {}  # op name -> clones to place before it
    rename: dict = {}         # original blob -> recomputed blob (for backward readers)
    names = set(position)
    for seg in segments.values():
        wanted = read_by_backward(seg) - kept
        need = clone_set(seg, wanted)
        wanted = {b for b in wanted if split_blob(b)[0] in need}
        if not wanted:
            continue
        first = min((o for o in backward if any(b in wanted for b in o.inputs)),
                    key=lambda o: position[o.name])
        local: dict = {}
        clones = []
        for name in sorted(need, key=position.__getitem__):
            o = producer[name]
            c = o.copy(name=unique_name(f"{name}-recompute", names),
                       inputs=[local.get(b, b) for b in o.inputs])
            c.tags = {k: v for k, v in o.tags.items() if k != "checkpointing"}
            c.tags.update(phase="backward", recompute_of=name)
            if registry.get(o.op_type).random:
                c.tags["seed_of"] = o.tags.get("seed_of", name)
            for i in range(len(o.outputs)):
                local[o.out(i)] = c.out(i)
            clones.append(c)
        insert_before.setdefault(first.name, []).extend(clones)
        rename.update({b: local[b] for b in wanted})
    if not rename:
        return job
    ops = []
    for o in job.ops:
        ops.extend(insert_before.get(o.name, ()))
        if o.tags.get("phase") == "backward":
            o.inputs = [rename.get(b, b) for b in o.inputs]
        ops.append(o)
    job.ops = ops
    _order_before_writers(job, {c.name for cs in insert_before.values() for c in cs})
    return job




def _order_before_writers(job: Job, new: set) -> None:
    """An op that writes a blob in place runs after the ops in ``new`` that read that blob
    earlier (a recomputation reading a parameter must run before the parameter's update)."""
    readers: dict = {}
    for o in job.ops:
        if o.op_type not in SYSTEM_OPS:
            for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
                for r in readers.get(o.inputs[i], ()):
                    if r != o.name and r not in o.ctrl_inputs:
                        o.ctrl_inputs.append(r)
        if o.name in new:
            for b in o.inputs:
                readers.setdefault(b, []).append(o.name)
