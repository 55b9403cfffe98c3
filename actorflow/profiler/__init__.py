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
        self.plans: dict = {}  # id of a runtime -> the Plan it runs
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
        rt = id(actor.rt)
        if rt not in self.plans:
            self.plans[rt] = actor.rt.plan
        self.events.append((actor.id, task.op_name, task.op_type, task.kind,
                            threading.current_thread().name, piece, start, end, rt))

    def acts(self) -> list:
        """Recorded acts as dicts (actor, op, op_type, kind, thread, iteration, start, end)."""
        keys = ("actor", "op", "op_type", "kind", "thread", "iteration", "start", "end",
                "runtime")
        return [dict(zip(keys, e)) for e in self.events]

    def export_chrome_trace(self, path: str) -> None:
        """Write the acts as a Chrome trace (JSON): a slice per act on its thread's track and a
        flow arrow from each producer's act to the acts of its consumers in the same iteration
        (from the Plan of the runtime that ran them)."""
        threads = sorted({e[4] for e in self.events})
        tid = {name: i for i, name in enumerate(threads)}
        out = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "actorflow"}}]
        for name, i in tid.items():
            out.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": i,
                        "args": {"name": name}})
        acts_of: dict = {}  # (runtime, actor) -> [(iteration, track, ts, dur)]
        for e in self.events:
            actor, op, op_type, kind, thread, piece, start, end, rt = e
            ts = (start - self.t0) * 1e6
            dur = max((end - start) * 1e6, 0.01)
            out.append({"ph": "X", "name": op, "cat": kind, "pid": 0, "tid": tid[thread],
                        "ts": ts, "dur": dur,
                        "args": {"actor": actor, "op_type": op_type, "iteration": piece}})
            acts_of.setdefault((rt, actor), []).append((piece, tid[thread], ts, dur))
        flow_id = 0
        for rt, plan in self.plans.items():
            for r in plan.regst_descs.values():
                produced = _by_iteration(acts_of.get((rt, r.producer), ()))
                for c in r.consumers:
                    consumed = _by_iteration(acts_of.get((rt, c), ()))
                    for piece, pacts in produced.items():
                        for (ptid, pts, pdur), (ctid, cts, _) in _pair(pacts,
                                                                       consumed.get(piece, [])):
                            flow_id += 1
                            out.append({"ph": "s", "id": flow_id, "name": "regst",
                                        "cat": "flow", "pid": 0, "tid": ptid,
                                        "ts": pts + pdur * 0.5})
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


def _by_iteration(acts) -> dict:
    """iteration -> [(track, ts, dur)] in time order."""
    out: dict = {}
    for piece, track, ts, dur in acts:
        out.setdefault(piece, []).append((track, ts, dur))
    for v in out.values():
        v.sort(key=lambda a: a[1])
    return out


def _pair(produced: list, consumed: list) -> list:
    """Which producer act fed which consumer act within one iteration: one to one when both
    act equally often (per micro-batch on both sides); with gradient accumulation a register
    made once feeds the consumer's first act (a repeat), and one made after n acts (an acc)
    comes from the producer's last act."""
    if not produced or not consumed:
        return []
    if len(produced) == len(consumed):
        return list(zip(produced, consumed))
    if len(consumed) == 1:
        return [(produced[-1], consumed[0])]
    return [(produced[0], consumed[0])]


__all__ = ["profile"]
