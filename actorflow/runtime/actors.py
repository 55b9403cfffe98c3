"""Actors: one per task. An actor acts when it is read-ready (a register has arrived from every
regst desc it consumes) and write-ready (a free register of what it produces exists). After
acting it sends the produced register to every consumer and acks each consumed register to its
producer; an ack makes a produced register free again.

``Actor`` is the general actor (any number of consumed regst descs, one produced). Kinds differ
in what ``compute`` does (run a kernel, bind a variable, feed an input, push an output, notify
the caller) and, for gradient accumulation, in how acts map to registers: ``RepeatActor`` /
``UnpackActor`` turn one consumed register into n produced ones, ``AccActor`` / ``PackActor`` n
into one. ``SourceActor`` (WaitAndSendIds) starts on ``START`` and blocks on the source Buffer.

Shutdown: once every producer sent EORD, an actor sends EORD to its consumers; it leaves (tells
its thread it is done) when all its registers are back (a zombie until then).
"""
from __future__ import annotations

import time
from collections import deque
from operator import itemgetter

import numpy as np

from actorflow import profiler as _profiler
from actorflow.compiler.task_id import thread_id_of
from actorflow.runtime.buffer import BufferStatus
from actorflow.runtime.message import ACK, EORD, REGST, START
from actorflow.runtime.regst import make_regsts
from actorflow.errors import KernelError, RemoteRankError, UnboundVariableError, kernel_failure
from actorflow.tensor import unsynced_array


_head = itemgetter(0)  # a queue's first register


class ActorError(RuntimeError):
    """The runtime met a Plan it can't run (a task kind without an actor, a missing input);
    a failing kernel raises ``actorflow.errors.KernelError`` instead."""


class Actor:
    """The general actor (see the module docstring)."""

    def __init__(self, task, runtime):
        self.task = task
        self.id = task.task_id
        self.rt = runtime
        self.send = runtime.bus.send
        plan = runtime.plan
        self.in_rids = [rid for rids in task.consumed_regsts.values() for rid in rids]
        self.inbox = {rid: deque() for rid in self.in_rids}
        self.n_in = len(self.in_rids)
        self.n_ready = 0
        out_rid = task.produced_regsts["out"]
        self.out_desc = plan.regst_descs[out_rid]
        self.free = deque(make_regsts(self.out_desc, runtime.blocks))
        self.consumers = tuple(self.out_desc.consumers)
        self.reading: dict = {}       # id(regst) -> acks still due
        self.total_reading = 0
        self.eord_left = self.n_in    # producers that have not sent EORD yet
        self.eord_sent = False
        self.acts = 0
        self.input_pos = [(self.in_rids.index(rid), idx) for rid, idx in task.input_blobs]
        me = runtime.threads[thread_id_of(self.id)]
        route = runtime.bus.route_from
        self.consumer_puts = [(c, route(me, c)) for c in self.consumers]
        self.producer_puts = {rid: route(me, plan.regst_descs[rid].producer)
                              for rid in self.in_rids}
        self.init()

    def init(self) -> None:
        """Kind-specific setup."""

    # -- messages ----------------------------------------------------------------------------
    def process(self, msg) -> bool:
        """Handle one message; True when the actor has finished and may be deleted."""
        kind = msg[0]
        if kind == REGST:
            regst = msg[3]
            q = self.inbox[regst.desc_id]
            if not q:
                self.n_ready += 1
            q.append(regst)
        elif kind == ACK:
            self.on_ack(msg[3])
        elif kind == EORD:
            self.eord_left -= 1
        elif kind == START:
            pass
        self.act_until_fail()
        return self.try_leave()

    def on_ack(self, regst) -> None:
        key = id(regst)
        left = self.reading[key] - 1
        self.total_reading -= 1
        if left:
            self.reading[key] = left
        else:
            del self.reading[key]
            self.free.append(regst)

    def try_leave(self) -> bool:
        if self.eord_left == 0 and self.n_ready == 0 and not self.eord_sent:
            self.eord_sent = True
            for c in self.consumers:
                self.send((EORD, self.id, c, self.out_desc.regst_desc_id))
        return self.eord_sent and self.total_reading == 0

    # -- acting --------------------------------------------------------------------------------
    def read_ready(self) -> bool:
        return self.n_ready == self.n_in

    def write_ready(self) -> bool:
        return bool(self.free)

    def act_until_fail(self) -> None:
        while self.n_ready == self.n_in and self.free and self.n_in:
            self.act()

    def act(self) -> None:
        ins = [self.inbox[rid][0] for rid in self.in_rids]
        out = self.free.popleft()
        first = ins[0]
        out.piece, out.micro = first.piece, first.micro
        prof = _profiler.ACTIVE
        t0 = time.perf_counter() if prof is not None else 0.0
        self.compute(ins, out)
        if prof is not None:
            prof.record(self, out.piece, t0, time.perf_counter())
        self.acts += 1
        self.emit(out)
        self.ack_inputs()

    def emit(self, out) -> None:
        puts = self.consumer_puts
        if puts:
            self.reading[id(out)] = len(puts)
            self.total_reading += len(puts)
            me = self.id
            for c, put in puts:
                put((REGST, me, c, out))
        else:
            self.free.append(out)

    def ack_inputs(self) -> None:
        inbox, puts, me = self.inbox, self.producer_puts, self.id
        for rid in self.in_rids:
            q = inbox[rid]
            r = q.popleft()
            if not q:
                self.n_ready -= 1
            puts[rid]((ACK, me, r.producer, r))

    def compute(self, ins: list, out) -> None:
        """What one act does (ticks do nothing)."""

    def fail(self, e: BaseException, arrays=None) -> KernelError:
        """The error for ``e`` raised by this actor's kernel on input ``arrays``."""
        t = self.task
        shapes = None if arrays is None else [a.shape for a in arrays]
        return kernel_failure(f"{t.op_type} (op {t.op_name})", t.scope, shapes, e)


def view_step(op_type: str, attrs: dict, index: int, shape: tuple):
    """``array -> array``: output ``index`` of view op ``op_type`` applied to an array (a reshape
    whose input has other strides than the compiler followed copies, as in eager mode).

    A register's arrays are the same objects every step, so the step returns the view it made
    for the same array last time: a generated kernel then finds its prepared call by the ids of
    its arrays (codegen/prepared.py) instead of by their addresses and layouts. Copies are made
    anew each time (they hold the values of one act)."""
    if op_type == "reshape":
        def view(a):
            try:
                return a.reshape(shape, copy=False), True
            except ValueError:
                return a.reshape(shape), False
    else:
        from actorflow.ops import registry

        fn = registry.get(op_type).view_fn

        def view(a):
            return fn([a], attrs)[index], True
    made: dict = {}  # id of a viewed array -> (that array, its view)

    def step(a):
        hit = made.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        v, is_view = view(a)
        if is_view:
            if len(made) >= _VIEWS_KEPT:
                made.clear()
            made[id(a)] = (a, v)
        return v
    return step


# views a view step keeps (the registers it reads: one or two, a few more after boxing)
_VIEWS_KEPT = 8


class KernelActor(Actor):
    """Runs a registered op's kernel (the same function eager mode calls) on register memory;
    inputs read through folded view ops (``TaskProto.input_views``) are viewed first."""

    def init(self) -> None:
        from actorflow.ops import registry

        self.in_views = [(pos, [view_step(*s) for s in steps])
                         for pos, steps in sorted(self.task.input_views.items())]
        op = registry.get(self.task.op_type)
        # the task's generated C kernel where the Plan has one (compiler/codegen), else NumPy's
        self.kernel = self.rt.generated_kernels.get(self.task.task_id, op.kernel_cpu)
        self.attrs = self.task.attrs
        self.random = op.random and self.attrs.get("seed") is None
        self.seed_key = self.task.tags.get("seed_of", self.task.op_name)
        self.writes_inputs = op.may_mutate

    def compute(self, ins: list, out) -> None:
        arrays = [ins[k].arrays[i] for k, i in self.input_pos]
        for pos, steps in self.in_views:
            a = arrays[pos]
            for step in steps:
                a = step(a)
            arrays[pos] = a
        attrs = self.attrs
        if self.random:
            attrs = dict(attrs, seed=self.rt.seed_for(out.piece, self.seed_key, out.micro))
        if self.writes_inputs:  # the call's state may change from here on
            fut = self.rt.pending.get(out.piece)
            if fut is not None:
                fut.wrote_state = True
        try:
            self.kernel(arrays, out.arrays, attrs)
        except RemoteRankError:   # another rank failed: its error, as it is
            raise
        except Exception as e:
            raise self.fail(e, arrays) from e


class LightKernelActor(KernelActor):
    """The fast path for the common case (OneFlow's LightActor): a kernel task whose output has
    a single register. Same protocol as ``Actor``; message handling, readiness, the kernel call,
    sending and acking are inlined into one method."""

    def init(self) -> None:
        super().init()
        # per consumed regst desc, in kernel order: its inbox and how to ack its producer
        self.in_queues = [self.inbox[rid] for rid in self.in_rids]
        self.in_acks = [(self.inbox[rid], self.producer_puts[rid]) for rid in self.in_rids]

    def process(self, msg) -> bool:
        kind = msg[0]
        if kind == REGST:
            regst = msg[3]
            q = self.inbox[regst.desc_id]
            if not q:
                self.n_ready += 1
            q.append(regst)
        elif kind == ACK:
            self.on_ack(msg[3])
        elif kind == EORD:
            self.eord_left -= 1
        free = self.free
        while self.n_ready == self.n_in and free:
            ins = list(map(_head, self.in_queues))
            out = free.popleft()
            first = ins[0]
            out.piece, out.micro = first.piece, first.micro
            prof = _profiler.ACTIVE
            t0 = time.perf_counter() if prof is not None else 0.0
            self.compute(ins, out)
            if prof is not None:
                prof.record(self, out.piece, t0, time.perf_counter())
            self.acts += 1
            me = self.id
            puts = self.consumer_puts
            if puts:
                self.reading[id(out)] = len(puts)
                self.total_reading += len(puts)
                for c, put in puts:
                    put((REGST, me, c, out))
            else:
                free.append(out)
            for q, ack in self.in_acks:
                r = q.popleft()
                if not q:
                    self.n_ready -= 1
                ack((ACK, me, r.producer, r))
        if self.eord_left == 0 or self.eord_sent:
            return self.try_leave()
        return False


class ViewActor(Actor):
    """A view op the compiler proved safe to alias (``job/views.py``): it publishes NumPy
    views of its input register instead of running the copying kernel. It holds the input
    register until its own has come back from every consumer, so the producer cannot write
    that memory again while a view of it is read."""

    def init(self) -> None:
        from actorflow.ops import registry

        self.view_fn = registry.get(self.task.op_type).view_fn
        self.attrs = self.task.attrs
        self.reshape_to = (tuple(self.out_desc.blobs[0][1].shape)
                           if self.task.op_type == "reshape" else None)
        self.held: deque = deque()    # input registers of acts whose views are still read

    def act(self) -> None:
        inbox, ins = self.inbox, []
        for rid in self.in_rids:
            q = inbox[rid]
            ins.append(q.popleft())
            if not q:
                self.n_ready -= 1
        out = self.free.popleft()
        out.piece, out.micro = ins[0].piece, ins[0].micro
        prof = _profiler.ACTIVE
        t0 = time.perf_counter() if prof is not None else 0.0
        self.compute(ins, out)
        if prof is not None:
            prof.record(self, out.piece, t0, time.perf_counter())
        self.acts += 1
        self.held.append(ins)
        self.emit(out)
        if not self.consumer_puts:
            self.release()

    def compute(self, ins: list, out) -> None:
        k, i = self.input_pos[0]
        a = ins[k].arrays[i]
        try:
            if self.reshape_to is not None:
                try:
                    views = [a.reshape(self.reshape_to, copy=False)]
                except ValueError:  # a root with other strides than planned: copy, as eager
                    views = [a.reshape(self.reshape_to)]
            else:
                views = self.view_fn([a], self.attrs)
        except Exception as e:
            raise self.fail(e, [a]) from e
        out.arrays[:] = views

    def on_ack(self, regst) -> None:
        super().on_ack(regst)
        if id(regst) not in self.reading:  # back from every consumer: free the input
            self.release()

    def release(self) -> None:
        me, puts = self.id, self.producer_puts
        for r in self.held.popleft():
            puts[r.desc_id]((ACK, me, r.producer, r))


class VariableActor(Actor):
    """Hands the live memory of a parameter, buffer or optimizer state to its consumers."""

    def init(self) -> None:
        name = self.task.attrs["name"]
        t = self.rt.bindings.get(name)
        if t is None:
            raise UnboundVariableError(f"variable {name!r} has no tensor bound to it")
        self.name = name
        self.tensor = t
        self.overrides = self.rt.overrides

    def compute(self, ins: list, out) -> None:
        if self.overrides:
            ov = self.overrides.get(out.piece)
            if ov is not None and self.name in ov:
                out.arrays[0] = ov[self.name]
                return
        out.arrays[0] = unsynced_array(self.tensor)  # the graph call's VM instruction is ordered


class LiteralActor(Actor):
    """A folded constant: its register is filled once at start."""

    def init(self) -> None:
        for r in self.free:
            np.copyto(r.arrays[0], self.task.attrs["value"])


class InputActor(Actor):
    """Takes this instance's array from the input Buffer of its index (no copy)."""

    def init(self) -> None:
        self.buffer = self.rt.input_buffers[self.task.attrs["index"]]

    def compute(self, ins: list, out) -> None:
        status, item = self.buffer.try_pull()
        if status is not BufferStatus.SUCCESS:
            raise ActorError(f"input {self.task.attrs['index']}: no input for job instance "
                             f"{out.piece} ({status.name})")
        out.arrays[0] = item


class OutputActor(Actor):
    """Copies the result into the output Buffer of its index."""

    def init(self) -> None:
        self.buffer = self.rt.output_buffers[self.task.attrs["index"]]

    def compute(self, ins: list, out) -> None:
        k, i = self.input_pos[0]
        self.buffer.push((out.piece, np.array(ins[k].arrays[i], copy=True)))


class SinkActor(Actor):
    """CallbackNotify: tells the runtime the job instance finished, once its act is over (and
    recorded by an active profiler: a caller woken by the notice sees every act of the call)."""

    def compute(self, ins: list, out) -> None:
        pass

    def act(self) -> None:
        piece = self.inbox[self.in_rids[0]][0].piece
        super().act()
        self.rt.on_instance_done(piece)


class SourceActor(Actor):
    """WaitAndSendIds: after START, pulls job instances from the source Buffer (blocking) and
    sends each on as an ``ids`` register; a closed buffer ends the stream with EORD."""

    def init(self) -> None:
        self.buffer = self.rt.source_buffer
        self.started = False
        self.closed = False

    def process(self, msg) -> bool:
        kind = msg[0]
        if kind == ACK:
            self.on_ack(msg[3])
        elif kind == START:
            self.started = True
        while self.started and not self.closed and self.free:
            status, piece = self.buffer.pull()
            if status is not BufferStatus.SUCCESS or self.rt.aborted:
                self.closed = True
                break
            out = self.free.popleft()
            prof = _profiler.ACTIVE
            t0 = time.perf_counter() if prof is not None else 0.0
            out.piece, out.micro = piece, 0
            out.arrays[0] = np.array(piece, dtype=np.int64)
            if prof is not None:
                prof.record(self, piece, t0, time.perf_counter())
            self.emit(out)
        if self.closed and not self.eord_sent:
            self.eord_sent = True
            for c in self.consumers:
                self.send((EORD, self.id, c, self.out_desc.regst_desc_id))
        return self.eord_sent and self.total_reading == 0


class RepeatActor(Actor):
    """One consumed register, n produced acts reading the same memory (a variable repeated for
    n micro-batches, or a tick)."""

    def init(self) -> None:
        self.n = int(self.task.attrs["n"])
        self.k = 0

    def act(self) -> None:
        src = self.inbox[self.in_rids[0]][0]
        out = self.free.popleft()
        out.piece, out.micro = src.piece, self.k
        prof = _profiler.ACTIVE
        t0 = time.perf_counter() if prof is not None else 0.0
        self.fill(src, out, self.k)
        if prof is not None:
            prof.record(self, out.piece, t0, time.perf_counter())
        self.k += 1
        self.acts += 1
        self.emit(out)
        if self.k == self.n:
            self.k = 0
            self.ack_inputs()

    def fill(self, src, out, k: int) -> None:
        for i in range(len(out.arrays)):
            out.arrays[i] = src.arrays[i]


class UnpackActor(RepeatActor):
    """One consumed register, n produced: piece k of the input split along dim 0."""

    def fill(self, src, out, k: int) -> None:
        whole = src.arrays[0]
        step = whole.shape[0] // self.n
        out.arrays[0] = whole[k * step:(k + 1) * step]


class AccActor(Actor):
    """n consumed acts, one produced register: the sum over micro-batches (or a count, for a
    tick)."""

    def init(self) -> None:
        self.n = int(self.task.attrs["n"])
        self.k = 0
        self.cur = None

    def act_until_fail(self) -> None:
        while self.n_ready == self.n_in and (self.cur is not None or self.free):
            self.act()

    def act(self) -> None:
        src = self.inbox[self.in_rids[0]][0]
        if self.cur is None:
            self.cur = self.free.popleft()
            self.cur.piece = src.piece
            self.cur.micro = 0
        prof = _profiler.ACTIVE
        t0 = time.perf_counter() if prof is not None else 0.0
        self.absorb(src, self.cur, self.k)
        if prof is not None:
            prof.record(self, src.piece, t0, time.perf_counter())
        self.k += 1
        self.acts += 1
        self.ack_inputs()
        if self.k == self.n:
            out, self.cur, self.k = self.cur, None, 0
            self.emit(out)

    def absorb(self, src, out, k: int) -> None:
        if not out.arrays:
            return
        v = src.arrays[self.input_pos[0][1]] if self.task.input_blobs else src.arrays[0]
        if k == 0:
            np.copyto(out.arrays[0], v, casting="unsafe")
        else:
            out.arrays[0] += v


class PackActor(AccActor):
    """n consumed acts, one produced register: the micro-batch results concatenated on dim 0."""

    def absorb(self, src, out, k: int) -> None:
        v = src.arrays[self.input_pos[0][1]]
        whole = out.arrays[0]
        step = whole.shape[0] // self.n if whole.ndim else 0
        if whole.ndim:
            whole[k * step:(k + 1) * step] = v
        else:
            whole[...] = v


ACTOR_KINDS = {
    "normal": KernelActor, "view": ViewActor, "variable": VariableActor, "literal": LiteralActor,
    "input": InputActor, "output": OutputActor, "callback_notify": SinkActor,
    "wait_and_send_ids": SourceActor, "compute_start": Actor, "iteration_end": Actor,
    "repeat": RepeatActor, "unpack": UnpackActor, "acc": AccActor, "pack": PackActor,
}


def make_actor(task, runtime) -> Actor:
    """The actor for ``task`` (by its kind; single-register kernel tasks take the light path)."""
    if task.kind == "normal" and runtime.plan.regst_descs[task.produced_regsts["out"]] \
            .regst_num == 1:
        return LightKernelActor(task, runtime)
    cls = ACTOR_KINDS.get(task.kind)
    if cls is None:
        raise ActorError(f"no actor for task kind {task.kind!r} (task {task.op_name})")
    return cls(task, runtime)
