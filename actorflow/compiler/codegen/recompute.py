"""What a graph with generated kernels recomputes instead of keeping in memory.

A generated kernel computes an element or a row from its inputs in registers, so values that
are cheap to compute need not be kept in register memory from the forward to the backward.
Before the compiler builds the tasks of a Job with generation on (``compile_job``), it
rewrites a copy of the Job:

1. **Optional outputs read back by a kernel that can recompute them.** An op's optional
   output (``Op.optional_outputs``: gelu's saved Phi(x)) whose every reader takes it as its
   last input only, where each reader's op has a row form for the call without it (``c_row``
   for one input fewer: gelu_grad recomputes Phi(x) from x), is dropped: the readers lose that
   input and the op stops writing it (its attr set to False).
2. **Activations read by backward ops.** The output of an elementwise ``activation`` op with
   a C form (gelu...) and one output, read by backward ops, whose inputs backward ops read
   anyway (so they stay alive), is recomputed by a clone of the op placed just before its
   first backward reader (tags: ``phase`` backward, ``recompute_of``), with control inputs on
   the backward producers of that reader's other inputs (so it runs when the backward gets
   there, not as soon as its input exists) and on the readers of the clone before it; the
   forward value then dies after its forward readers. The clone runs the same kernel on the
   same input: the same bits.

3. **A recomputed activation and its gradient in one op.** Where the clone's op has a
   ``recompute_grad`` trait ``(grad op, fused op)`` (gelu: gelu_grad, gelu_with_grad) and a
   backward call of the grad op reads ``(dout, x)`` with x the clone's input and attrs the
   clone also has, the two become one call of the fused op in the clone's place (its name, outputs:
   the clone's, then the grad's), where every input and control input of both is produced
   before the first reader of either: one generated loop computes what the two computed
   apart (gelu's Phi(x) once), with the same values.

The Job a Graph shows (``full_job``) is not changed; the Plan shows the result (the clones'
tasks are named ``<op>-recompute``). ``graph.register_memory()`` compares the register
memory with and without generation.
"""
from __future__ import annotations

from actorflow.job.job import Job, split_blob, unique_name
from actorflow.job.system_ops import SYSTEM_OPS
from actorflow.ops import registry


def recompute(job: Job) -> Job:
    """``job`` (changed in place and returned) with the rewrites of the module docstring."""
    _drop_recomputable_outputs(job)
    clones = _recompute_activations(job)
    if clones:
        _fuse_with_grads(job, clones)
    return job


def _readers(job: Job) -> dict:
    out: dict = {}
    for o in job.ops:
        for b in o.inputs:
            out.setdefault(b, []).append(o)
    return out


def _drop_recomputable_outputs(job: Job) -> None:
    readers = _readers(job)
    kept = set(job.train.get("grads", {}).values())
    for o in job.ops:
        if o.op_type in SYSTEM_OPS:
            continue
        for attr, idx in registry.get(o.op_type).optional_outputs.items():
            if not o.attrs.get(attr) or idx != len(o.outputs) - 1:
                continue
            blob = o.out(idx)
            rs = readers.get(blob, [])
            if blob in kept or not all(_recomputes_last(r, blob) for r in rs):
                continue
            for r in {id(r): r for r in rs}.values():
                r.inputs = r.inputs[:-1]
            o.attrs = {**o.attrs, attr: False}
            o.outputs = o.outputs[:idx]


def _recomputes_last(reader, blob: str) -> bool:
    """``reader`` reads ``blob`` only as its last input and computes without it in C."""
    if reader.op_type in SYSTEM_OPS or reader.inputs[-1] != blob or reader.inputs.count(blob) != 1:
        return False
    op = registry.get(reader.op_type)
    return op.c_row is not None and op.row_form(reader.attrs, len(reader.inputs) - 1) is not None


def _has_c_form(op, conf) -> bool:
    if op.c_row is not None and op.row_form(conf.attrs, len(conf.inputs)) is not None:
        return True
    return op.c_expr is not None and op.c_form(conf.attrs) is not None


def _recompute_activations(job: Job) -> list:
    """Insert the clones of rewrite 2; returns them."""
    backward = [o for o in job.ops if o.tags.get("phase") == "backward"]
    if not backward:
        return []
    read_in_backward = {b for o in backward for b in o.inputs}
    position = {o.name: i for i, o in enumerate(job.ops)}
    producer = {o.name: o for o in job.ops}
    names = set(position)
    insert_before: dict = {}
    clones: list = []  # (position of the first reader, clone, its readers' names)
    for o in list(job.ops):
        if o.op_type in SYSTEM_OPS or o.tags.get("phase") != "forward" or len(o.outputs) != 1:
            continue
        op = registry.get(o.op_type)
        if (not op.activation or not op.elementwise or op.random or not o.inputs
                or op.mutated_inputs(len(o.inputs), o.attrs) or not _has_c_form(op, o)):
            continue
        blob = o.out(0)
        if blob not in read_in_backward or not all(
                b in read_in_backward and producer[split_blob(b)[0]].op_type not in SYSTEM_OPS
                for b in o.inputs):
            continue  # (an input from a variable might be updated before the clone runs)
        users = [u for u in backward if blob in u.inputs]
        first = min(users, key=lambda u: position[u.name])
        # after what the first reader's other inputs wait for, not as soon as x exists
        after = sorted({split_blob(b)[0] for b in first.inputs if b != blob
                        and producer[split_blob(b)[0]].tags.get("phase") == "backward"})
        clone = o.copy(name=unique_name(f"{o.name}-recompute", names), ctrl_inputs=after)
        clone.tags = {**o.tags, "phase": "backward", "recompute_of": o.name}
        for u in users:
            u.inputs = [clone.out(0) if b == blob else b for b in u.inputs]
        insert_before.setdefault(first.name, []).append(clone)
        clones.append((position[first.name], clone, [u.name for u in users]))
    # each clone after the readers of the one before it: those readers (a weight's gradient)
    # lead nowhere but to the update, so without the edge no later register could take the
    # earlier clone's memory
    clones.sort(key=lambda c: c[0])
    for (_, _, readers), (_, clone, _) in zip(clones, clones[1:]):
        clone.ctrl_inputs = list(dict.fromkeys(clone.ctrl_inputs + readers))
    if insert_before:
        ops = []
        for o in job.ops:
            ops.extend(insert_before.get(o.name, ()))
            ops.append(o)
        job.ops = ops
    return [c for _, c, _ in clones]


def _fuse_with_grads(job: Job, clones: list) -> None:
    """Rewrite 3 of the module docstring."""
    position = {o.name: i for i, o in enumerate(job.ops)}
    by_name = {o.name: o for o in job.ops}
    readers: dict = {}  # op name -> names of the ops reading its outputs or waiting on it
    for o in job.ops:
        for p in {split_blob(b)[0] for b in o.inputs} | set(o.ctrl_inputs):
            readers.setdefault(p, set()).add(o.name)
    removed: dict = {}  # grad op name -> the fused op (the clone's name) whose output 1 it was
    for clone in clones:
        pair = registry.get(clone.op_type).recompute_grad
        if pair is None:
            continue
        grad_type, fused_type = pair[0].name, pair[1].name
        x = clone.inputs[0]
        grads = [r for r in (by_name[n] for n in readers.get(split_blob(x)[0], ()))
                 if r.op_type == grad_type and len(r.inputs) == 2 and r.inputs[1] == x
                 and all(clone.attrs.get(k) == v for k, v in r.attrs.items())
                 and r.tags.get("phase") == "backward"
                 and r.name not in removed]
        for grad in sorted(grads, key=lambda r: position[r.name]):
            deps = {split_blob(b)[0] for b in clone.inputs + grad.inputs}
            deps |= set(clone.ctrl_inputs) | set(grad.ctrl_inputs)
            users = readers.get(clone.name, set()) | readers.get(grad.name, set())
            if not users or max(position[d] for d in deps) >= min(position[u] for u in users):
                continue  # no place after what both wait for and before what reads either
            clone.op_type, clone.attrs = fused_type, dict(grad.attrs)
            clone.inputs = list(grad.inputs)
            clone.outputs = [clone.outputs[0], grad.outputs[0]]
            clone.ctrl_inputs = sorted(d for d in deps - {split_blob(b)[0] for b in grad.inputs}
                                       if d != clone.name)
            clone.tags = {**clone.tags, "grad_of": grad.name}
            removed[grad.name] = clone.name
            break
    if not removed:
        return
    ops = []
    for o in job.ops:
        if o.name in removed:
            continue
        o.inputs = [f"{removed[n]}/1" if n in removed else b
                    for b, n in ((b, split_blob(b)[0]) for b in o.inputs)]
        o.ctrl_inputs = list(dict.fromkeys(removed.get(c, c) for c in o.ctrl_inputs))
        ops.append(o)
    job.ops = ops
    _place_before_readers(job, set(removed.values()))


def _place_before_readers(job: Job, moved: set) -> None:
    """Move each op of ``moved`` just before its first reader (it now reads what the grad op
    read, produced before that reader, but possibly after the op's old place)."""
    first_reader: dict = {}
    for o in job.ops:
        for p in {split_blob(b)[0] for b in o.inputs} | set(o.ctrl_inputs):
            if p in moved and p not in first_reader:
                first_reader[p] = o.name
    keep = [o for o in job.ops if o.name not in moved]
    ahead: dict = {}
    for o in job.ops:
        if o.name in moved:
            ahead.setdefault(first_reader[o.name], []).append(o)
    ops = []
    for o in keep:
        ops.extend(ahead.get(o.name, ()))
        ops.append(o)
    job.ops = ops


__all__ = ["recompute"]
