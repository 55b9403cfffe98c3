"""Job -> Plan: one task per op (one device for now) plus the system tasks the runtime needs.

System tasks, as in OneFlow's compiled jobs:

* ``wait_and_send_ids`` (source stream): blocks on the graph's source Buffer; each pull is one
  job instance, sent on as an ``ids`` register;
* ``input`` (io stream): takes this instance's tensor from the input Buffer of its index;
* ``compute_start`` tick: opens an iteration's compute section; it hands a tick to every task
  with no other inputs (variables, literals, creation ops) and to ``iteration_end``;
* ``variable``: hands the live memory of a parameter/buffer/optimizer state to its consumers;
* ``output``: copies a result into the output Buffer of its index;
* ``view``: a view op the Job proves safe to alias (``job/views.py``) publishes a strided
  view of its input register instead of copying (its regst is ``alias_of`` the input's);
* ``iteration_end`` tick: acts when every task of the iteration has acted (it reads the register
  of every task nobody else reads); because it also holds ``compute_start``'s register, the
  next iteration's compute starts only after this one's ended - which is what makes sharing
  memory between registers of one iteration safe;
* ``callback_notify`` (the sink): tells the caller the iteration is complete;
* ``collective`` (comm stream): an op calling an MPI collective (boxing), acted in a fixed
  order (``compiler/collective.py``).
* ``send`` / ``recv`` (p2p stream): the halves of a move between placements, non-blocking
  transfers between ranks (``compiler/transfer.py``).

Gradient accumulation's ``micro_unpack``/``micro_repeat``/``micro_acc``/``micro_pack`` ops become
``unpack``/``repeat``/``acc``/``pack`` tasks;
control and tick edges that cross between once-per-iteration and per-micro-batch tasks get
``repeat``/``acc`` tick tasks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from actorflow.compiler import codegen, collective, transfer
from actorflow.compiler.memory import plan_memory
from actorflow.compiler.straighten import chain, straighten
from actorflow.compiler.plan import Plan, RegstDesc, TaskProto
from actorflow.compiler.task_id import encode_task_id
from actorflow.compiler.lanes import LANE_STREAMS, assign_lanes
from actorflow.job.views import alias_views, foldable_views
from actorflow.job.schedule import stage_of
from actorflow.job.job import BlobDesc, Job, split_blob
from actorflow.job.system_ops import system_op
from actorflow.framework import dtype as dt
from actorflow.settings import env_flag, env_int

_IDS = BlobDesc((), dt.int64)


@dataclass
class CompileOptions:
    """Knobs of the compiler: register counts, memory sharing, views and compute lanes (the
    last three read their ``ACTORFLOW_GRAPH_*`` variable when the options are made)."""

    regst_num: int = 1            # registers per op output (>= 2 lets an op run ahead)
    input_regst_num: int = 2      # registers per input: the next call's input overlaps compute
    source_regst_num: int = 2     # job instances the source may hand out ahead
    share_memory: bool = True
    # view ops the Job proves safe publish views, not copies (ACTORFLOW_GRAPH_ALIAS_VIEWS)
    alias_views: bool = field(
        default_factory=lambda: env_flag("ACTORFLOW_GRAPH_ALIAS_VIEWS", True))
    # aliased views read only by kernels get no task of their own (ACTORFLOW_GRAPH_FOLD_VIEWS)
    fold_views: bool = field(
        default_factory=lambda: env_flag("ACTORFLOW_GRAPH_FOLD_VIEWS", True))
    # compute threads kernel tasks are spread over, 1 or 2 (ACTORFLOW_GRAPH_COMPUTE_LANES)
    compute_lanes: int = field(
        default_factory=lambda: env_int("ACTORFLOW_GRAPH_COMPUTE_LANES", 1, minimum=1))
    # generated C kernels: elementwise, row and update tasks (ACTORFLOW_GRAPH_CODEGEN=0: off)
    # (on by default; ACTORFLOW_GRAPH_CODEGEN=0 runs every task on its NumPy kernel)
    codegen: bool = field(default_factory=lambda: env_flag("ACTORFLOW_GRAPH_CODEGEN", True))
    # control edges making backward leaves act early and, on one compute lane, kernels act in
    # the Job's topological order (compiler/straighten.py; ACTORFLOW_GRAPH_STRAIGHTEN=0: off)
    straighten: bool = field(
        default_factory=lambda: env_flag("ACTORFLOW_GRAPH_STRAIGHTEN", True))
    rank: int = 0
    world_size: int = 1           # ranks of a distributed graph (each compiles its own Plan)


class _Builder:
    def __init__(self, job: Job, options: CompileOptions):
        self.job = job
        self.opt = options
        self.tasks: list = []
        self.regsts: dict = {}
        self.next_index: dict = {}
        self.out_regst: dict = {}     # task id -> its "out" regst id
        self.task_of_op: dict = {}    # op name -> task
        self.n_micro = int(job.train.get("accumulation_steps", 1))

    def new_task(self, kind: str, stream: str, op_name: str, op_type: str = "", attrs=None,
                 scope: str = "", time_shape: int = 1, tags=None) -> TaskProto:
        idx = self.next_index.get(stream, 0)
        self.next_index[stream] = idx + 1
        tid = encode_task_id(self.opt.rank, "cpu", 0, stream, idx)
        t = TaskProto(tid, kind, op_name, op_type or kind, dict(attrs or {}), {}, {}, [], scope,
                      time_shape, dict(tags or {}))
        self.tasks.append(t)
        return t

    def produce(self, task: TaskProto, blobs: list, regst_num: int = 1) -> RegstDesc:
        rid = len(self.regsts)
        r = RegstDesc(rid, task.task_id, [], regst_num, blobs)
        self.regsts[rid] = r
        task.produced_regsts["out"] = rid
        self.out_regst[task.task_id] = rid
        return r

    def consume(self, consumer: TaskProto, name: str, rid: int) -> None:
        ids = consumer.consumed_regsts.setdefault(name, [])
        if rid not in ids:
            ids.append(rid)
        r = self.regsts[rid]
        if consumer.task_id not in r.consumers:
            r.consumers.append(consumer.task_id)


def compile_job(job: Job, options: CompileOptions | None = None) -> Plan:
    """Compile ``job`` (after passes) into a Plan (with generation on, of the Job with what
    generated kernels recompute instead of keeping: ``codegen/recompute.py``)."""
    opt = options or CompileOptions()
    if opt.codegen and codegen.compiler_found():
        job = codegen.recompute(job.copy())
    straight = job.train.get("straighten", opt.straighten)  # or a graph's config's choice
    if straight:
        job = job.copy()
        straighten(job)
    b = _Builder(job, opt)
    n = b.n_micro
    order = job.topological_order()
    stages = stage_of(job) if n > 1 else {}
    aliased, alias_ctrl = alias_views(job, order) if opt.alias_views else (set(), [])
    if straight and opt.compute_lanes == 1 and chain(job, alias_ctrl):
        # one compute thread runs the kernels one after another anyway: fix the order, so
        # the memory plan knows it (respecting the views' edges just decided)
        order = job.topological_order()
    folded = foldable_views(order, aliased) if opt.fold_views else set()
    through: dict = {}  # output blob of a folded view -> (base blob, view steps)
    lane = assign_lanes(job, order, opt.compute_lanes, aliased)
    piped = transfer.pipeline_regst_num(job, n)

    source = b.new_task("wait_and_send_ids", "source", "System-Src-WaitAndSendIds")
    ids = b.produce(source, [("ids", _IDS)], opt.source_regst_num)
    start = b.new_task("compute_start", "compute", "System-ComputeStart-Tick")
    b.consume(start, "ids", ids.regst_desc_id)
    start_tick = b.produce(start, [], 1)

    micro_tick = None  # compute_start's tick repeated for per-micro-batch tasks

    def tick_for(task: TaskProto) -> int:
        nonlocal micro_tick
        if task.time_shape == 1:
            return start_tick.regst_desc_id
        if micro_tick is None:
            rep = b.new_task("repeat", "compute", "System-ComputeStart-Tick-Repeat",
                             op_type="tick_repeat", attrs={"n": n}, time_shape=n)
            b.consume(rep, "in_0", start_tick.regst_desc_id)
            micro_tick = b.produce(rep, [], 1)
            rep.tags["tick"] = True
        return micro_tick.regst_desc_id

    for conf in order:
        if conf.name in folded:
            base, steps = through.get(conf.inputs[0], (conf.inputs[0], ()))
            for i, d in enumerate(conf.outputs):
                through[conf.out(i)] = (base, (*steps, (conf.op_type, dict(conf.attrs), i,
                                                        tuple(d.shape))))
            continue
        stage = stages.get(conf.name, "micro")
        time_shape = n if (n > 1 and stage == "micro") else 1
        if conf.op_type in ("micro_repeat", "micro_unpack"):
            time_shape = n
        elif conf.op_type in ("micro_acc", "micro_pack"):
            time_shape = 1
        row = system_op(conf.op_type)
        kind, stream = (row.task_kind, row.stream) if row is not None else ("normal", "compute")
        if row is None and collective.is_collective(conf.op_type):
            kind, stream = collective.KIND, collective.STREAM
        if row is None and transfer.transfer_kind(conf.op_type):
            kind, stream = transfer.transfer_kind(conf.op_type), transfer.STREAM
        if conf.name in aliased:
            kind = "view"
        if stream == "compute":
            stream = LANE_STREAMS[lane[conf.name]]
        attrs = dict(conf.attrs)
        if kind in ("unpack", "repeat", "acc", "pack"):
            attrs.setdefault("n", n)
        t = b.new_task(kind, stream, conf.name, conf.op_type, attrs, conf.scope, time_shape,
                       conf.tags)
        b.task_of_op[conf.name] = t
        regst_num = opt.input_regst_num if kind == "input" else opt.regst_num
        if time_shape > 1 and piped:
            regst_num = max(regst_num, piped)
        if kind in ("variable", "view"):
            regst_num = 1  # the live state: the next iteration reads it after this one's writes;
            # a view holds its input register until its own comes back
        b.produce(t, [(conf.out(i), d) for i, d in enumerate(conf.outputs)], regst_num)
        if kind == "input":
            b.consume(t, "ids", ids.regst_desc_id)
            continue
        names: dict = {}
        for pos, blob in enumerate(conf.inputs):
            if blob in through:
                blob, steps = through[blob]
                t.input_views[pos] = list(steps)
            src, idx = split_blob(blob)
            rid = b.out_regst[b.task_of_op[src].task_id]
            if rid not in names:
                names[rid] = f"in_{len(names)}"
                b.consume(t, names[rid], rid)
            t.input_blobs.append((rid, idx))
        for c in conf.ctrl_inputs:
            producer = b.task_of_op[c]
            rid = b.out_regst[producer.task_id]
            if rid in names:
                continue
            rid = _adapt_time(b, producer, t, rid, n)
            b.consume(t, "in_ctrl", rid)
        if not conf.inputs:
            b.consume(t, "tick", tick_for(t))
        if kind in ("repeat", "unpack", "view"):
            b.regsts[t.produced_regsts["out"]].alias_of = t.input_blobs[0][0]
    for reader, writer in alias_ctrl:  # readers through a view act before writes of its base
        if reader in folded:
            continue  # its readers have edges of their own
        producer, consumer = b.task_of_op[reader], b.task_of_op[writer]
        rid = b.out_regst[producer.task_id]
        if rid not in consumer.consumed_regsts.get("in_ctrl", ()) and not any(
                rid == r for r, _ in consumer.input_blobs):
            b.consume(consumer, "in_ctrl", _adapt_time(b, producer, consumer, rid, n))

    # iteration_end reads every compute task's register that nobody else reads
    end = b.new_task("iteration_end", "compute", "System-IterationEnd-Tick")
    for t in list(b.tasks):
        if t.kind in ("wait_and_send_ids", "iteration_end", "input") or t.tags.get("tick"):
            continue
        rid = b.out_regst[t.task_id]
        if t.kind == "compute_start" or not b.regsts[rid].consumers:
            b.consume(end, "in_ctrl" if t.kind != "compute_start" else "tick",
                      _adapt_time(b, t, end, rid, n))
    end_tick = b.produce(end, [], 1)
    sink = b.new_task("callback_notify", "compute", "System-Sink-CallbackNotify")
    b.consume(sink, "tick", end_tick.regst_desc_id)
    b.produce(sink, [], 1)

    _check_sources(b.tasks)
    collective.number_tasks(b.tasks, stages, n)
    io = {"source": source.task_id, "sink": sink.task_id,
          "inputs": {str(t.attrs["index"]): t.task_id for t in b.tasks if t.kind == "input"},
          "outputs": {str(t.attrs["index"]): t.task_id for t in b.tasks if t.kind == "output"},
          "accumulation_steps": n}
    plan = Plan(job.name, b.tasks, b.regsts, None, io, rank=opt.rank,
                world_size=opt.world_size)
    if opt.codegen:  # before the memory plan: generated kernels may write in place
        codegen.generate(plan)
    plan.memory = plan_memory(b.tasks, b.regsts, share=opt.share_memory,
                              in_place=codegen.in_place_of(plan))
    return plan


def _adapt_time(b: _Builder, producer: TaskProto, consumer: TaskProto, rid: int, n: int) -> int:
    """A tick/control regst crossing between time shapes goes through a repeat or acc task."""
    if producer.time_shape == consumer.time_shape:
        return rid
    if producer.time_shape == 1:
        kind, ts = "repeat", n
    else:
        kind, ts = "acc", 1
    t = b.new_task(kind, "compute", f"{producer.op_name}-tick-{kind}", op_type=f"tick_{kind}",
                   attrs={"n": n}, time_shape=ts)
    t.tags["tick"] = True
    b.consume(t, "in_0", rid)
    return b.produce(t, [], 1).regst_desc_id


def _check_sources(tasks: list) -> None:
    sources = [t for t in tasks if t.is_source]
    if [t.kind for t in sources] != ["wait_and_send_ids"]:
        bad = [t.op_name for t in sources if t.kind != "wait_and_send_ids"]
        raise AssertionError(f"compiler: tasks without inputs other than the source: {bad}")


__all__ = ["compile_job", "CompileOptions"]
