"""``actorflow.profiler``: record every act of the actor runtime and every VM instruction, and
export a Chrome trace.

    with flow.profiler.profile() as prof:
        graph(x)
        y = x * 2
        flow.synchronize()
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev

Actor acts: one track per runtime thread; each act is a slice (actor, op, iteration, start, end)
and a flow arrow joins each producer's act to the consumer acts that read its register in that
iteration. VM instructions (eager kernels, graph launches): one track per VM worker thread (or
the calling thread, for kernels run inline).

Profiles nest and may overlap, also across threads: each records everything that started while
it was recording (an outer profile includes the inner one's events; two threads' profiles each
get the events of their own time span, whichever thread caused them). All of them share one
log, so an act costs one append however many profiles are open; a profile takes its part of
the log when it exits. Work still running at exit (an unsynchronised call) may be cut off.

Several processes (``mpiexec``): each rank profiles itself and writes its own trace; a path
gets the rank (``trace.json`` -> ``trace.rank1.json``, or put ``{rank}`` in it). A rank's trace
has one process (pid) per rank and kind (actors ``2 * rank``, VM ``2 * rank + 1``) and records
the wall-clock time of its origin, so ``merge_traces`` (or ``python -m
actorflow.profiler.merge OUT IN...``) lays the ranks' traces on one time axis in one file.
"""
from __future__ import annotations

import json
import os
import threading
import time

from actorflow.process.world import world
from actorflow.profiler.merge import merge_traces

# The shared log while at least one profile records, else None. Actors and the VM look here
# on every act / instruction, so the check costs nothing when no profile is open.
ACTIVE = None
_lock = threading.Lock()  # guards ACTIVE's creation and the log's user count

# event tuple: (actor, op, op_type, kind, thread, iteration, start, end, runtime); VM
# instructions have actor, iteration and runtime None, kind "vm" and their stream kind as op_type
_START, _END = 6, 7
VM_KIND = "vm"


class _Log:
    """Events of every profile open at the moment (appends are atomic under the GIL)."""

    __slots__ = ("events", "plans", "open", "base")

    def __init__(self):
        self.events: list = []
        self.plans: dict = {}  # id of a runtime -> the Plan it runs
        self.open: list = []   # the profiles recording into it
        self.base = 0          # events dropped from the front (no open profile needs them)

    def record(self, actor, piece: int, start: float, end: float) -> None:
        """Called by an actor after each act."""
        task = actor.task
        rt = id(actor.rt)
        if rt not in self.plans:
            self.plans[rt] = actor.rt.plan
        self.events.append((actor.id, task.op_name, task.op_type, task.kind,
                            threading.current_thread().name, piece, start, end, rt))

    def record_instruction(self, name: str, stream: str, start: float, end: float) -> None:
        """Called by the VM after running an instruction (on the thread that ran it)."""
        self.events.append((None, name, stream, VM_KIND, threading.current_thread().name,
                            None, start, end, None))


def _fused_args(task) -> dict:
    """Trace args naming what a fused task holds: ``ops`` (its program's ops) and
    ``generated`` (the generated C kernel it runs), where the task has them."""
    if task is None:
        return {}
    out = {}
    if task.attrs.get("ops"):
        out["ops"] = " ".join(task.attrs["ops"])
    if getattr(task, "generated", ""):
        out["generated"] = task.generated
    return out


class profile:
    """Context manager recording actor acts and VM instructions; see the module docstring.
    One object records one span at a time; it may be entered again after it exited (it then
    starts afresh)."""

    def __init__(self):
        self._events: list = []
        self.plans: dict = {}  # id of a runtime -> the Plan it runs
        self.t0 = 0.0          # when recording started (perf_counter; the trace's time origin)
        self.wall0 = 0.0       # the same moment in wall-clock time (aligns ranks' traces)
        self.t1 = None         # when it stopped
        self._log = None       # the shared log while recording
        self._first = 0        # index in the shared log where this span starts

    def __enter__(self) -> "profile":
        global ACTIVE
        with _lock:
            if self._log is not None:
                raise RuntimeError("flow.profiler.profile: this profile is already recording; "
                                   "use a new profile() object to nest one")
            log = ACTIVE
            if log is None:
                log = ACTIVE = _Log()
            log.open.append(self)
            self._log = log
            self._first = log.base + len(log.events)
            # after taking the index: every event starting from now is appended past it
            self.t0 = time.perf_counter()
            self.wall0 = time.time()
            self.t1 = None
        return self

    def __exit__(self, *exc) -> bool:
        global ACTIVE
        with _lock:
            log, self._log = self._log, None
            if log is None:
                return False
            self.t1 = time.perf_counter()
            self._events = self._take(log)
            rts = {e[8] for e in self._events}
            self.plans = {rt: plan for rt, plan in list(log.plans.items()) if rt in rts}
            log.open.remove(self)
            if not log.open:
                if ACTIVE is log:
                    ACTIVE = None
            else:  # forget what no open profile will take
                keep = min(p._first for p in log.open)
                if keep > log.base:
                    del log.events[:keep - log.base]
                    log.base = keep
        return False

    def _take(self, log: _Log) -> list:
        """This span's part of ``log`` (call under ``_lock``): events appended since entering
        that started after."""
        t0 = self.t0
        return [e for e in log.events[self._first - log.base:] if e[_START] >= t0]

    @property
    def recording(self) -> bool:
        """True between ``__enter__`` and ``__exit__``."""
        return self._log is not None

    @property
    def events(self) -> list:
        """Recorded event tuples (so far, while recording)."""
        with _lock:
            log = self._log
            return self._take(log) if log is not None else self._events

    def acts(self) -> list:
        """Recorded actor acts as dicts (actor, op, op_type, kind, thread, iteration, start,
        end, runtime)."""
        keys = ("actor", "op", "op_type", "kind", "thread", "iteration", "start", "end",
                "runtime")
        return [dict(zip(keys, e)) for e in self.events if e[3] != VM_KIND]

    def instructions(self) -> list:
        """Recorded VM instructions as dicts (name, stream, thread, start, end)."""
        return [{"name": e[1], "stream": e[2], "thread": e[4], "start": e[_START],
                 "end": e[_END]} for e in self.events if e[3] == VM_KIND]

    def export_chrome_trace(self, path) -> str:
        """Write the events as a Chrome trace (JSON); returns the path written. Process 0 holds
        the actor runtime's threads: a slice per act on its thread's track and a flow arrow
        from each producer's act to the acts of its consumers in the same iteration (from the
        Plan of the runtime that ran them). Process 1 holds the VM: a slice per instruction
        (category ``vm``). Under ``mpiexec`` the path gets the rank (``{rank}`` in it is
        replaced, else ``.rank<r>`` goes before the extension) and the processes are
        ``2 * rank`` and ``2 * rank + 1``, named with the rank; ``merge_traces`` joins the
        ranks' files."""
        rank, size = world().rank, world().size
        path = rank_path(os.fspath(path), rank, size)
        base = 2 * rank
        events = self.events
        log = self._log
        plans = dict(self.plans) if log is None else dict(log.plans)
        acts = [e for e in events if e[3] != VM_KIND]
        instrs = [e for e in events if e[3] == VM_KIND]
        suffix = f" rank {rank}" if size > 1 else ""
        out = [{"ph": "M", "name": "process_name", "pid": 0,
                "args": {"name": f"actorflow{suffix}"}}]
        if instrs:
            out.append({"ph": "M", "name": "process_name", "pid": 1,
                        "args": {"name": f"actorflow VM{suffix}"}})
        tid = {}
        for pid, group in ((0, acts), (1, instrs)):
            for name in sorted({e[4] for e in group}):
                tid[pid, name] = len(tid)
                out.append({"ph": "M", "name": "thread_name", "pid": pid,
                            "tid": tid[pid, name], "args": {"name": name}})
        for e in instrs:
            _, name, stream, _, thread, _, start, end, _ = e
            out.append({"ph": "X", "name": name, "cat": VM_KIND, "pid": 1,
                        "tid": tid[1, thread], "ts": (start - self.t0) * 1e6,
                        "dur": max((end - start) * 1e6, 0.01), "args": {"stream": stream}})
        acts_of: dict = {}  # (runtime, actor) -> [(iteration, track, ts, dur)]
        tasks_of = {rt: {t.task_id: t for t in plan.tasks} for rt, plan in plans.items()}
        for e in acts:
            actor, op, op_type, kind, thread, piece, start, end, rt = e
            ts = (start - self.t0) * 1e6
            dur = max((end - start) * 1e6, 0.01)
            track = tid[0, thread]
            args = {"actor": actor, "op_type": op_type, "iteration": piece}
            args.update(_fused_args(tasks_of.get(rt, {}).get(actor)))
            out.append({"ph": "X", "name": op, "cat": kind, "pid": 0, "tid": track,
                        "ts": ts, "dur": dur, "args": args})
            acts_of.setdefault((rt, actor), []).append((piece, track, ts, dur))
        flow_id = 0
        for rt, plan in plans.items():
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
        for e in out:
            e["pid"] += base
        out += [{"ph": "M", "name": "process_sort_index", "pid": e["pid"],
                 "args": {"sort_index": e["pid"]}}
                for e in out if e["ph"] == "M" and e["name"] == "process_name"]
        with open(path, "w") as f:
            json.dump({"traceEvents": out, "displayTimeUnit": "ms",
                       "otherData": {"rank": rank, "world_size": size,
                                     "wall_t0_us": self.wall0 * 1e6}}, f)
        return path

    def summary(self) -> str:
        """Per op (actor acts and VM instructions): count and total / mean time in µs."""
        agg: dict = {}
        for e in self.events:
            a = agg.setdefault(e[1], [0, 0.0])
            a[0] += 1
            a[1] += e[_END] - e[_START]
        lines = [f"{'op':40s} {'acts':>6s} {'total us':>10s} {'mean us':>9s}"]
        for op, (n, tot) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{op[:40]:40s} {n:6d} {tot * 1e6:10.1f} {tot * 1e6 / n:9.1f}")
        return "\n".join(lines)


def rank_path(path: str, rank: int, world_size: int) -> str:
    """The file a rank's trace goes to: ``path`` itself in one process; under ``mpiexec``
    ``{rank}`` in it replaced, else ``.rank<r>`` put before the extension."""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    if world_size <= 1:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}.rank{rank}{ext}"


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


__all__ = ["profile", "merge_traces", "rank_path"]
