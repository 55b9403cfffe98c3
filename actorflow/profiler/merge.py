"""Merge the Chrome traces of several ranks into one: ``merge_traces(paths, out)`` or
``python -m actorflow.profiler.merge OUT.json IN.json...``.

Each rank's trace (``profile.export_chrome_trace`` under ``mpiexec``) holds its own processes
(actors ``2 * rank``, VM ``2 * rank + 1``, named with the rank), one track per thread, and the
wall-clock time of its origin (``otherData.wall_t0_us``). The merge shifts every rank's events
onto the earliest origin, so one time axis holds all ranks (the ranks of one machine share its
clock; across machines the alignment is as good as their clock synchronisation). Process ids
that two files share (traces of one process) are renumbered; flow ids are made unique.
"""
from __future__ import annotations

import json
import os
import sys


def merge_traces(paths: list, out=None) -> dict:
    """Merge the Chrome trace files ``paths`` (one per rank) into one trace dict; write it to
    ``out`` when given. Raises ``ValueError`` naming a file that is not a rank trace."""
    traces = []
    for p in paths:
        with open(os.fspath(p)) as f:
            t = json.load(f)
        meta = t.get("otherData", {}) if isinstance(t, dict) else {}
        if "traceEvents" not in t or "wall_t0_us" not in meta:
            raise ValueError(f"merge_traces: {os.fspath(p)} is not an actorflow profiler "
                             "trace (no traceEvents / otherData.wall_t0_us)")
        traces.append((meta.get("rank", 0), os.fspath(p), t))
    if not traces:
        raise ValueError("merge_traces: no traces given")
    traces.sort(key=lambda x: x[0])
    origin = min(t["otherData"]["wall_t0_us"] for _, _, t in traces)
    events: list = []
    used: set = set()
    flow_base = 0
    for _, _, t in traces:
        shift = t["otherData"]["wall_t0_us"] - origin
        pids = sorted({e["pid"] for e in t["traceEvents"] if "pid" in e})
        remap = {}
        for pid in pids:
            new = pid
            while new in used:
                new += 2
            remap[pid] = new
        used.update(remap.values())
        top = 0
        for e in t["traceEvents"]:
            e = dict(e)
            if "pid" in e:
                e["pid"] = remap[e["pid"]]
            if "ts" in e:
                e["ts"] = e["ts"] + shift
            if e.get("ph") in ("s", "t", "f") and "id" in e:
                top = max(top, e["id"])
                e["id"] = e["id"] + flow_base
            if e.get("ph") == "M" and e.get("name") == "process_sort_index":
                e["args"] = {"sort_index": e["pid"]}
            events.append(e)
        flow_base += top
    merged = {"traceEvents": events, "displayTimeUnit": "ms",
              "otherData": {"ranks": [r for r, _, _ in traces],
                            "files": [p for _, p, _ in traces], "wall_t0_us": origin}}
    if out is not None:
        with open(os.fspath(out), "w") as f:
            json.dump(merged, f)
    return merged


def main(argv: list | None = None) -> int:
    """``python -m actorflow.profiler.merge OUT IN...``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m actorflow.profiler.merge OUT.json RANK0.json RANK1.json ...",
              file=sys.stderr)
        return 2
    merged = merge_traces(argv[1:], argv[0])
    print(f"merged {len(argv) - 1} traces of ranks {merged['otherData']['ranks']} "
          f"into {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
