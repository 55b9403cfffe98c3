"""Checks a Job is well formed (what the pass manager runs after every pass)."""
from __future__ import annotations

from actorflow.job.job import Job, split_blob
from actorflow.job.system_ops import SYSTEM_OPS


class JobError(ValueError):
    """A Job is malformed (a pass produced a broken Job, or a loaded one is inconsistent)."""


def verify_job(job: Job, recheck: set | None = None) -> None:
    """Raise JobError unless every op name is unique, every input blob and control input is
    produced by an earlier op, and every registered op's outputs agree with its inference.

    ``recheck`` limits the inference check to the named ops (the pass manager passes the ops a
    pass added or changed and their readers; the rest were checked before and read unchanged
    inputs). None checks every op."""
    from actorflow.ops import registry

    seen: dict = {}
    for o in job.ops:
        if o.name in seen:
            raise JobError(f"job {job.name}: op name {o.name!r} is used twice")
        for b in o.inputs:
            name, idx = split_blob(b)
            src = seen.get(name)
            if src is None:
                raise JobError(f"job {job.name}: op {o.name} reads {b}, which no earlier op "
                               f"produces")
            if not 0 <= idx < len(src.outputs):
                raise JobError(f"job {job.name}: op {o.name} reads {b}, but {name} has "
                               f"{len(src.outputs)} outputs")
        for c in o.ctrl_inputs:
            if c not in seen:
                raise JobError(f"job {job.name}: op {o.name} has a control input {c!r} that is "
                               f"not an earlier op")
        if o.op_type not in SYSTEM_OPS:
            try:
                op = registry.get(o.op_type)
            except KeyError:
                raise JobError(f"job {job.name}: op {o.name} has unknown type "
                               f"{o.op_type!r}") from None
            if recheck is None or o.name in recheck:
                _check_inference(job, op, o, seen)
        elif o.op_type == "output" and len(o.inputs) != 1:
            raise JobError(f"job {job.name}: output op {o.name} must read exactly one blob")
        seen[o.name] = o


def _check_inference(job, op, o, seen) -> None:
    from actorflow.job.job import BlobDesc

    metas = [seen[split_blob(b)[0]].outputs[split_blob(b)[1]] for b in o.inputs]
    try:
        inferred = op.infer_fn([_meta_tensor(m) for m in metas], o.attrs)
    except Exception as e:
        raise JobError(f"job {job.name}: op {o.name} ({o.op_type}) fails inference on its "
                       f"inputs {[tuple(m.shape) for m in metas]}: {e}") from None
    got = [BlobDesc(tuple(m[0]), m[1]) for m in inferred]
    if got != list(o.outputs):
        raise JobError(f"job {job.name}: op {o.name} ({o.op_type}) records outputs "
                       f"{_fmt(o.outputs)} but inference gives {_fmt(got)}")


def _fmt(descs) -> str:
    return "[" + ", ".join(f"{tuple(b.shape)}:{b.dtype.name}" for b in descs) + "]"


def _meta_tensor(desc):
    """A value-less tensor with the blob's shape and dtype, for inference functions."""
    from actorflow.tensor import MetaBlob, Tensor

    return Tensor._from_handle(MetaBlob("<verify>"), tuple(desc.shape), desc.dtype)


def topological_order(job: Job) -> list:
    """Ops ordered so that producers (and control inputs) come first; among ready ops the
    stored order wins, so an already valid order is returned unchanged."""
    import heapq

    if _in_order(job.ops):  # the common case (a verified Job): one cheap pass
        return list(job.ops)
    position = {o.name: i for i, o in enumerate(job.ops)}
    deps: dict = {}
    users: dict = {}
    for o in job.ops:
        preds = {split_blob(b)[0] for b in o.inputs} | set(o.ctrl_inputs)
        for p in preds:
            if p not in position:
                raise JobError(f"job {job.name}: op {o.name} depends on unknown op {p!r}")
        deps[o.name] = len(preds)
        for p in preds:
            users.setdefault(p, []).append(o.name)
    ready = [position[n] for n, d in deps.items() if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        o = job.ops[i]
        out.append(o)
        for u in users.get(o.name, ()):
            deps[u] -= 1
            if deps[u] == 0:
                heapq.heappush(ready, position[u])
    if len(out) != len(job.ops):
        stuck = [n for n, d in deps.items() if d > 0]
        raise JobError(f"job {job.name}: cycle among ops {stuck[:5]}")
    return out


def _in_order(ops: list) -> bool:
    """Whether every op's producers and control inputs come before it in ``ops``."""
    seen: set = set()
    for o in ops:
        for b in o.inputs:
            if split_blob(b)[0] not in seen:
                return False
        for c in o.ctrl_inputs:
            if c not in seen:
                return False
        seen.add(o.name)
    return True
