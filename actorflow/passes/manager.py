"""The pass manager: runs passes (pure functions Job -> Job) in order, verifying the Job after
each one and recording what each pass changed."""
from __future__ import annotations

import time

from actorflow.job import attrs as attr_codec
from actorflow.job.job import Job, OpConf, split_blob
from actorflow.job.verify import JobError, verify_job


def diff_jobs(before: Job, after: Job) -> dict:
    """Ops added, removed and changed (same name, different conf) between two Jobs."""
    a = {o.name: o for o in before.ops}
    b = {o.name: o for o in after.ops}
    added = [n for n in b if n not in a]
    removed = [n for n in a if n not in b]
    changed = [n for n in b if n in a and not _same_conf(a[n], b[n])]
    return {"added": added, "removed": removed, "changed": changed}


def _same_conf(x: OpConf, y: OpConf) -> bool:
    """``x.to_dict() == y.to_dict()``, without encoding the attrs a pass's copy of the Job
    shares with the original (the common case: most ops are untouched)."""
    if (x.op_type != y.op_type or x.inputs != y.inputs or x.scope != y.scope
            or x.ctrl_inputs != y.ctrl_inputs or len(x.outputs) != len(y.outputs)):
        return False
    if x.outputs != y.outputs:  # (a copy shares the BlobDescs: equal at C speed)
        for p, q in zip(x.outputs, y.outputs):
            if tuple(p.shape) != tuple(q.shape) or p.dtype is not q.dtype:
                return False
    return _same_values(x.attrs, y.attrs) and _same_values(x.tags, y.tags)


def _same_values(d: dict, e: dict) -> bool:
    try:
        # dict equality tries identity first: the values a copy shares compare at C speed
        if d == e:
            return True
    except (ValueError, TypeError):  # an array value: its == gives an array, not a bool
        pass
    if d.keys() != e.keys():
        return False
    for k, v in d.items():
        w = e[k]
        if v is not w and attr_codec.encode(v) != attr_codec.encode(w):
            return False
    return True


def _to_recheck(job: Job, diff: dict) -> set:
    """Ops whose inference must be checked again after a pass: those it added or changed, and
    the readers of their blobs (a changed producer may have changed what they read)."""
    touched = set(diff["added"]) | set(diff["changed"])
    if not touched:
        return touched
    recheck = set(touched)
    for o in job.ops:
        if any(split_blob(b)[0] in touched for b in o.inputs):
            recheck.add(o.name)
    return recheck


def _same_order(a: Job, b: Job) -> bool:
    return len(a.ops) == len(b.ops) and all(x.name == y.name for x, y in zip(a.ops, b.ops))


def run_passes(job: Job, passes: list, verify: bool = True,
               input_verified: bool = False) -> tuple:
    """Apply ``passes`` (a list of ``(name, fn)``) to ``job``; returns ``(job, log)`` where
    ``log`` has one entry per pass: name, seconds, added / removed / changed op names and a
    one-line summary. A pass that breaks the Job raises JobError naming the pass. ``job``
    itself is never changed (each pass gets a copy).

    The first pass's result is verified in full unless ``input_verified`` says ``job`` was;
    after that, names, inputs and control inputs are checked in full and shapes/dtypes
    (inference) for the ops the pass added or changed and their readers, since every other op
    was verified with the same inputs before. A pass that changed nothing (the same ops, confs
    and order) is not verified again."""
    log = []
    checked = input_verified  # whether ``job`` (the next pass's input) has been verified
    for name, fn in passes:
        before = job
        t0 = time.perf_counter()
        job = fn(before.copy())
        if not isinstance(job, Job):
            raise TypeError(f"pass {name} returned {type(job).__name__}, not a Job")
        d = diff_jobs(before, job)
        # the same ops, confs and order as a verified input need no check
        unchanged = checked and not (d["added"] or d["removed"] or d["changed"]) \
            and _same_order(before, job)
        if verify and not unchanged:
            try:
                verify_job(job, _to_recheck(job, d) if checked else None)
            except JobError as e:
                raise JobError(f"after pass {name}: {e}") from None
            checked = True
        d["name"] = name
        d["seconds"] = time.perf_counter() - t0
        d["summary"] = (f"+{len(d['added'])} ops, -{len(d['removed'])} ops, "
                        f"~{len(d['changed'])} changed ({len(job.ops)} ops)")
        log.append(d)
    return job, log
