"""The physical Plan: tasks (one per op per device, plus system tasks), the registers (regst
descs) they produce and consume, and the memory plan.

* ``TaskProto``: ``task_id`` (see ``task_id.py``; the thread derives from it), ``kind`` (which
  actor runs it), the Job op it executes (``op_name``, ``op_type``, ``attrs``),
  ``produced_regsts`` (name -> regst desc id), ``consumed_regsts`` (input name -> list of regst
  desc ids; data inputs are ``in_0``, ``in_1``..., control edges are ``in_ctrl``) and
  ``input_blobs`` (for the kernel, in order: ``(regst desc id, blob index)``).
* ``RegstDesc``: ``producer``, ``consumers``, ``regst_num`` (how many registers exist: >1 lets
  the producer run ahead of its consumers), ``blobs`` (what one register holds; none for a
  control regst) and, from the memory plan, each blob's ``(block, offset)``.
* ``Plan``: tasks, regst descs, memory report, the ``rank`` it runs on and the ``world_size``
  (a distributed graph compiles one Plan per rank); ``to_json``/``from_json`` and ``to_dot``.

In JSON and DOT each task also states where it runs - ``rank``, ``device``, ``stream`` and
``thread`` (OneFlow's TaskProto does the same), so a reader needs no task-id decoder; they are
derived from ``task_id`` (``from_json`` checks they agree with it).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from actorflow.compiler.task_id import decode_task_id, describe_thread, thread_id_of
from actorflow.job import attrs as attr_codec
from actorflow.job.job import BlobDesc


@dataclass
class RegstDesc:
    """A kind of register: produced by one task, read by its consumers."""

    regst_desc_id: int
    producer: int
    consumers: list
    regst_num: int
    blobs: list                      # [(blob name, BlobDesc)]
    is_ctrl: bool = False
    mem: list = field(default_factory=list)  # per register, per blob: (block id, offset) or None
    alias_of: int | None = None      # the regst whose memory this one reuses (repeat/unpack)

    def nbytes(self) -> int:
        return sum(_aligned(d.nbytes()) for _, d in self.blobs)

    def to_dict(self) -> dict:
        return {"regst_desc_id": self.regst_desc_id, "producer": self.producer,
                "consumers": list(self.consumers), "regst_num": self.regst_num,
                "blobs": [[n, d.to_dict()] for n, d in self.blobs], "is_ctrl": self.is_ctrl,
                "mem": [[list(m) if m is not None else None for m in r] for r in self.mem],
                "alias_of": self.alias_of}

    @staticmethod
    def from_dict(d: dict) -> "RegstDesc":
        return RegstDesc(d["regst_desc_id"], d["producer"], list(d["consumers"]),
                         d["regst_num"], [(n, BlobDesc.from_dict(b)) for n, b in d["blobs"]],
                         d["is_ctrl"],
                         [[tuple(m) if m is not None else None for m in r] for r in d["mem"]],
                         d.get("alias_of"))


@dataclass
class TaskProto:
    """One task: what an actor does and which registers it uses."""

    task_id: int
    kind: str
    op_name: str
    op_type: str
    attrs: dict
    produced_regsts: dict            # name -> regst desc id
    consumed_regsts: dict            # "in_i" -> [regst id], "in_ctrl" -> [regst ids]
    input_blobs: list                # [(regst desc id, blob index)] in kernel order
    scope: str = ""
    time_shape: int = 1              # acts per iteration (n for micro-batch tasks)
    tags: dict = field(default_factory=dict)
    # kernel input position -> view steps [op type, attrs, output index, shape] applied to the
    # consumed array (view ops folded into their reader, job/views.py)
    input_views: dict = field(default_factory=dict)
    # the generated C kernel the task runs instead of its NumPy kernel ("": none; codegen/)
    generated: str = ""

    @property
    def thread_id(self) -> int:
        return thread_id_of(self.task_id)

    @property
    def is_source(self) -> bool:
        """A source task consumes nothing but control regsts (it starts on kStart)."""
        return all(k == "in_ctrl" for k in self.consumed_regsts)

    def placement(self) -> dict:
        """Where the task runs, from its id: rank, device (``"cpu:0"``), stream, thread id and
        thread name."""
        t = decode_task_id(self.task_id)
        return {"rank": t.rank, "device": f"{t.device_type}:{t.device_index}",
                "stream": t.stream, "thread_id": self.thread_id,
                "thread": describe_thread(self.thread_id)}

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, **self.placement(), "kind": self.kind,
                "op_name": self.op_name,
                "op_type": self.op_type,
                "attrs": {k: attr_codec.encode(v) for k, v in self.attrs.items()},
                "produced_regsts": dict(self.produced_regsts),
                "consumed_regsts": {k: list(v) for k, v in self.consumed_regsts.items()},
                "input_blobs": [list(x) for x in self.input_blobs], "scope": self.scope,
                "time_shape": self.time_shape,
                "tags": {k: attr_codec.encode(v) for k, v in self.tags.items()},
                "input_views": {str(k): [[op, {a: attr_codec.encode(v) for a, v in at.items()},
                                          i, list(shape)] for op, at, i, shape in steps]
                                for k, steps in self.input_views.items()},
                "generated": self.generated}

    @staticmethod
    def from_dict(d: dict) -> "TaskProto":
        t = TaskProto._from_dict(d)
        where = t.placement()
        wrong = {k: (d[k], v) for k, v in where.items() if k in d and d[k] != v}
        if wrong:
            raise ValueError(f"plan JSON: task {t.op_name} ({t.task_id}) states "
                             f"{ {k: a for k, (a, _) in wrong.items()} } but its task id says "
                             f"{ {k: b for k, (_, b) in wrong.items()} }")
        return t

    @staticmethod
    def _from_dict(d: dict) -> "TaskProto":
        return TaskProto(d["task_id"], d["kind"], d["op_name"], d["op_type"],
                         {k: attr_codec.decode(v) for k, v in d["attrs"].items()},
                         dict(d["produced_regsts"]),
                         {k: list(v) for k, v in d["consumed_regsts"].items()},
                         [tuple(x) for x in d["input_blobs"]], d.get("scope", ""),
                         d.get("time_shape", 1),
                         {k: attr_codec.decode(v) for k, v in d.get("tags", {}).items()},
                         {int(k): [(op, {a: attr_codec.decode(v) for a, v in at.items()}, i,
                                    tuple(shape)) for op, at, i, shape in steps]
                          for k, steps in d.get("input_views", {}).items()},
                         d.get("generated", ""))



def _held_ops(task) -> list:
    """The ops a task's kernel computes, for its DOT label: a program's ``ops``; a
    multi-tensor update's ``grad_scale`` op (a fused clip) and ``update`` op; else its own."""
    if task.attrs.get("ops"):
        return list(task.attrs["ops"])
    held = [task.attrs[k] for k in ("grad_scale", "update") if task.attrs.get(k)]
    return held or [task.op_type]

class Plan:
    """A compiled Job: tasks, regst descs and the memory plan (see the module docstring)."""

    def __init__(self, job_name: str, tasks: list, regst_descs: dict, memory: dict | None = None,
                 io: dict | None = None, rank: int = 0, world_size: int = 1):
        self.job_name = job_name
        self.rank = rank              # the rank this Plan runs on
        self.world_size = world_size  # ranks running the graph, each its own Plan
        self.tasks: list = tasks
        self.regst_descs: dict = regst_descs  # id -> RegstDesc
        self.memory: dict = memory or {}
        self.io: dict = io or {}               # input/output task ids by index, source, sink
        # what the code generator made of it (compiler/codegen: status, library, tasks)
        self.codegen: dict = {}
        self.generated_kernels: dict | None = None  # task id -> kernel (not serialised)

    def task(self, task_id: int) -> TaskProto:
        for t in self.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(f"plan has no task {task_id}")

    def task_by_op(self, op_name: str) -> TaskProto:
        for t in self.tasks:
            if t.op_name == op_name:
                return t
        raise KeyError(f"plan has no task for op {op_name!r}")

    @property
    def thread_ids(self) -> list:
        return sorted({t.thread_id for t in self.tasks})

    @property
    def source_tasks(self) -> list:
        return [t for t in self.tasks if t.is_source]

    def to_dict(self) -> dict:
        return {"job_name": self.job_name, "rank": self.rank, "world_size": self.world_size,
                "tasks": [t.to_dict() for t in self.tasks],
                "regst_descs": [r.to_dict() for r in self.regst_descs.values()],
                "memory": attr_codec.encode(self.memory), "io": attr_codec.encode(self.io),
                "codegen": attr_codec.encode(self.codegen)}

    def to_json(self, indent: int | None = None) -> str:
        """The Plan as JSON (``Plan.from_json`` loads it back equal)."""
        return json.dumps(self.to_dict(), indent=indent)

    @staticmethod
    def from_json(text: str) -> "Plan":
        d = json.loads(text)
        regsts = {r["regst_desc_id"]: RegstDesc.from_dict(r) for r in d["regst_descs"]}
        plan = Plan(d["job_name"], [TaskProto.from_dict(t) for t in d["tasks"]], regsts,
                    attr_codec.decode(d["memory"]), attr_codec.decode(d["io"]),
                    d.get("rank", 0), d.get("world_size", 1))
        plan.codegen = attr_codec.decode(d.get("codegen", {}))
        return plan

    def __eq__(self, other) -> bool:
        return isinstance(other, Plan) and self.to_dict() == other.to_dict()

    def to_dot(self) -> str:
        """Graphviz DOT: tasks grouped by thread, regsts as edges (dashed for control)."""
        lines = [f'digraph "{self.job_name}-plan" {{', "  rankdir=TB;",
                 f'  label="{_esc(self._title())}"; labelloc=t;',
                 '  node [shape=box, fontsize=10, fontname="Helvetica"];']
        by_thread: dict = {}
        for t in self.tasks:
            by_thread.setdefault(t.thread_id, []).append(t)
        for k, (tid, tasks) in enumerate(sorted(by_thread.items())):
            lines.append(f"  subgraph cluster_thread_{k} {{")
            lines.append(f'    label="thread {describe_thread(tid)}"; style=rounded;')
            for t in tasks:
                idx = decode_task_id(t.task_id).index
                w = t.placement()
                label = (f"{t.op_name}\\n{t.kind} #{idx}\\nrank {w['rank']} {w['device']} "
                         f"{w['stream']}")
                if t.generated:  # a generated kernel: the ops it holds
                    label += f"\\nC {t.generated}: {' '.join(_held_ops(t))}"
                lines.append(f'    t{t.task_id} [label="{_esc(label)}"];')
            lines.append("  }")
        for r in self.regst_descs.values():
            for c in r.consumers:
                style = ", style=dashed, color=gray" if r.is_ctrl else ""
                label = f"r{r.regst_desc_id} x{r.regst_num}"
                lines.append(f'  t{r.producer} -> t{c} [label="{label}"{style}];')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _title(self) -> str:
        if self.world_size > 1:
            return (f"Plan {self.job_name} of rank {self.rank} "
                    f"(one of {self.world_size} ranks' Plans)")
        return f"Plan {self.job_name}"

    def summary(self) -> str:
        """Task and regst counts, threads and memory; a distributed graph's Plan names its
        rank."""
        lines = [f"{self._title()}: {len(self.tasks)} tasks, {len(self.regst_descs)} "
                 f"regst descs, threads {[describe_thread(t) for t in self.thread_ids]}"]
        if self.memory:
            lines.append(f"  memory: {self.memory.get('bytes_without_sharing', 0)} bytes "
                         f"without sharing, {self.memory.get('bytes_with_sharing', 0)} with")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Plan {self.job_name!r}: {len(self.tasks)} tasks>"


def _esc(s: str) -> str:
    return s.replace('"', '\\"')


def _aligned(n: int) -> int:
    return (n + 63) // 64 * 64
