"""``actorflow.profiler``: record every act of the actor runtime and export a Chrome trace.

    with flow.profiler.profile() as prof:
        graph(x)
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev

One track per runtime thread; each act is a slice (actor, op, iteration, start, end) and a flow
arrow joins each producer's act to the consumer acts that read its register in that iteration.
"""
from __future__ import annotations

import json
import threading
import time

ACTIVE = None  # the profile being recorded (actors look here on every act)


class profile:
    """Context manager recording acts; see the module docstring."""

    def __init__(self):
        self.events: list = []
        self._lock = threading.Lock()
        self.t0 = 0.0

    def __enter__(self) -> "profile":
        global ACTIVE
        self.events = []
        self.t0 = time.perf_counter()
        ACTIVE = self
        return self

    def __exit__(self, *exc) -> bool:
        global ACTIVE
        ACTIVE = None
        return False

    def record(self, actor, piece: int, start: float, end: float) -> None:
        """Called by an actor after each act (list.append is atomic under the GIL)."""
        task = actor.task
        self.events.append((actor.id, task.op_name, task.op_type, task.kind,
                            threading.current_thread().name, piece, start, end))

    def acts(self) -> list:
        """Recorded acts as dicts (actor, op, op_type, kind, thread, iteration, start, end)."""
        keys = ("actor", "op", "op_type", "kind", "thread", "iteration", "start", "end")
        return [dict(zip(keys, e)) for e in self.events]

    def export_chrome_trace(self, path: str, plan=None) -> None:
        """Write the acts as a Chrome trace (JSON). With ``plan`` (a Plan), add flow arrows
        from each producer's act to the acts of its consumers in the same iteration."""
        threads = sorted({e[4] for e in self.events})
        tid = {name: i for i, name in enumerate(threads)}
        out = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "actorflow"}}]
        for name, i in tid.items():
            out.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": i,
                        "args": {"name": name}})
        last_act: dict = {}
        for e in self.events:
            actor, op, op_type, kind, thread, piece, start, end = e
            ts = (start - self.t0) * 1e6
            out.append({"ph": "X", "name": op, "cat": kind, "pid": 0, "tid": tid[thread],
                        "ts": ts, "dur": max((end - start) * 1e6, 0.01),
                        "args": {"actor": actor, "op_type": op_type, "iteration": piece}})
            last_act[(actor, piece)] = (tid[thread], ts, max((end - start) * 1e6, 0.01))
        if plan is not None:
            flow_id = 0
            for r in plan.regst_descs.values():
                for c in r.consumers:
                    for (actor, piece), (ptid, pts, pdur) in list(last_act.items()):
                        if actor != r.producer:
                            continue
                        hit = last_act.get((c, piece))
                        if hit is None:
                            continue
                        ctid, cts, _ = hit
                        flow_id += 1
                        out.append({"ph": "s", "id": flow_id, "name": "regst", "cat": "flow",
                                    "pid": 0, "tid": ptid, "ts": pts + pdur * 0.5})
                        out.append({"ph": "f", "bp": "e", "id": flow_id, "name": "regst",
                                    "cat": "flow", "pid": 0, "tid": ctid, "ts": cts})
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms"}, f)

    def summary(self) -> str:
        """Per op: acts and total / mean time in µs."""
        agg: dict = {}
        for e in self.events:
            a = agg.setdefault(e[1], [0, 0.0])
            a[0] += 1
            a[1] += e[7] - e[6]
        lines = [f"{'op':40s} {'acts':>6s} {'total us':>10s} {'mean us':>9s}"]
        for op, (n, tot) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{op[:40]:40s} {n:6d} {tot * 1e6:10.1f} {tot * 1e6 / n:9.1f}")
        return "\n".join(lines)


__all__ = ["profile"]
