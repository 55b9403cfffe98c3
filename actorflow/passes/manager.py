"""The pass manager: runs passes (pure functions Job -> Job) in order, verifying the Job after
each one and recording what each pass changed."""
from __future__ import annotations

import time

from actorflow.job.job import Job
from actorflow.job.verify import JobError


def diff_jobs(before: Job, after: Job) -> dict:
    """Ops added, removed and changed (same name, different conf) between two Jobs."""
    a = {o.name: o for o in before.ops}
    b = {o.name: o for o in after.ops}
    added = [n for n in b if n not in a]
    removed = [n for n in a if n not in b]
    changed = [n for n in b if n in a and a[n].to_dict() != b[n].to_dict()]
    return {"added": added, "removed": removed, "changed": changed}


def run_passes(job: Job, passes: list, verify: bool = True) -> tuple:
    """Apply ``passes`` (a list of ``(name, fn)``) to ``job``; returns ``(job, log)`` where
    ``log`` has one entry per pass: name, seconds, added / removed / changed op names and a
    one-line summary. A pass that breaks the Job raises JobError naming the pass."""
    log = []
    for name, fn in passes:
        before = job
        t0 = time.perf_counter()
        job = fn(before.copy())
        if not isinstance(job, Job):
            raise TypeError(f"pass {name} returned {type(job).__name__}, not a Job")
        if verify:
            try:
                job.verify()
            except JobError as e:
                raise JobError(f"after pass {name}: {e}") from None
        d = diff_jobs(before, job)
        d["name"] = name
        d["seconds"] = time.perf_counter() - t0
        d["summary"] = (f"+{len(d['added'])} ops, -{len(d['removed'])} ops, "
                        f"~{len(d['changed'])} changed ({len(job.ops)} ops)")
        log.append(d)
    return job, log
