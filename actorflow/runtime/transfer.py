"""Send and recv actors: the two halves of a move between placements in a distributed graph,
on the rank's ``p2p`` thread (``compiler/transfer.py``), with the read/ack protocol carried
across processes.

* ``SendActor`` acts when its input register arrived and a marker register is free: it posts
  ``Isend`` of the register's array and keeps the input register (several may be in flight,
  one per free marker register). Only when the transfer
  completed does it ack the input (so the producer's register is free again) and emit the
  marker. That is what lets ``regst_num > 1`` pipeline across ranks: the producer on this
  rank fills its next register while the previous one is still on the wire.
* ``RecvActor`` acts when the iteration's tick arrived and one of its registers is free: it
  posts ``Irecv`` into that register (acking the tick, which carries no data); when the data
  arrived it emits the register to its consumers, who ack it as any register.

The tag of a message is the transfer's number (``attrs["tag"]``, a multiple of ``TAG_SPAN``)
plus the iteration (and micro-batch) modulo ``TAG_SPAN``, so both sides name the same register
of the same iteration. One ``TransferPoller`` thread per runtime tests the posted requests and
wakes the actor (a ``START`` message carrying the request) on its own thread when one
completes. A request pending past ``ACTORFLOW_COMM_TIMEOUT``, or when another rank's call of
the graph failed (its failure notice, ``process.watchdog``), aborts the runtime with a
``RemoteRankError`` naming the transfer and the failing rank: the pending graph calls raise
it and the runtime's threads leave, so a rank that failed never leaves the other one waiting.
Requests given up on are kept with their buffers until exit (``watchdog.abandon``).
"""
from __future__ import annotations

import threading
import time
from collections import deque

import numpy as np

from actorflow import profiler as _profiler
from actorflow.compiler.task_id import thread_id_of
from actorflow.process import watchdog
from actorflow.ops.transfer import TAG_SPAN, comm_and_peer
from actorflow.runtime.actors import ACTOR_KINDS, Actor, view_step
from actorflow.runtime.message import ACK, START


class TransferPoller:
    """Tests a runtime's pending non-blocking transfers (see the module docstring)."""

    def __init__(self, rt):
        self.rt = rt
        self.pending: list = []   # [request, actor, token, what, posted at, group]
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="actorflow-p2p-poller",
                                       daemon=True)
        self.thread.start()

    def add(self, request, actor, token, what: str, group: str) -> None:
        """Watch ``request`` (on the communicator ``group`` of the graph); when it completes,
        wake ``actor`` with ``token``."""
        with self.cond:
            self.pending.append([request, actor, token, what, time.monotonic(), group])
            self.cond.notify()

    def _give_up(self, work: list) -> None:
        for w in work:
            watchdog.abandon(w[0], w[2])

    def _run(self) -> None:
        rt = self.rt
        while True:
            with self.cond:
                while not self.pending:
                    if rt.closed or rt.aborted:
                        return
                    self.cond.wait(0.05)
                work = list(self.pending)
            if rt.aborted:
                self._give_up(work)
                return
            done = [w for w in work if w[0].Test()]
            if done:
                with self.cond:
                    for w in done:
                        self.pending.remove(w)
                for _, actor, token, _, _, _ in done:
                    rt.threads[thread_id_of(actor.id)].enqueue((START, actor.id, actor.id,
                                                                 token))
                continue
            limit = watchdog.timeout()
            for _, _, _, what, t0, group in work:
                err = watchdog.abandon_error(group, what, "", t0, limit)
                if err is not None:
                    self._give_up(work)
                    rt.abort(err)
                    return
            time.sleep(0.0002)


def _poller(rt) -> TransferPoller:
    p = getattr(rt, "transfer_poller", None)
    if p is None:
        p = rt.transfer_poller = TransferPoller(rt)
    return p


class _TransferActor(Actor):
    """What send and recv share: each act posts one request (as many in flight as there are
    free registers); the poller's wake-up (``START`` carrying the request's record) finishes
    it. Requests finish in the order they were posted."""

    ack_at_post = False   # recv: the tick carries no data, so it is acked at once

    def init(self) -> None:
        a = self.task.attrs
        self.comm, self.peer = comm_and_peer(a)
        self.base_tag = int(a["tag"])
        self.n_micro = int(self.task.time_shape)
        self.inflight: deque = deque()   # [request, buffer, out register, posted, ins, done]
        self.poller = _poller(self.rt)

    def tag(self, piece: int, micro: int) -> int:
        return self.base_tag + (piece * self.n_micro + micro) % TAG_SPAN

    def process(self, msg) -> bool:
        if msg[0] == START and msg[3] is not None:
            rec = msg[3]
            if any(r is rec for r in self.inflight):
                rec[5] = True
                while self.inflight and self.inflight[0][5]:
                    self.finish(self.inflight.popleft())
        return super().process(msg)

    def act_until_fail(self) -> None:
        while self.n_ready == self.n_in and self.free and self.n_in:
            self.act()

    def act(self) -> None:
        ins = []
        for rid in self.in_rids:
            q = self.inbox[rid]
            ins.append(q.popleft())
            if not q:
                self.n_ready -= 1
        out = self.free.popleft()
        first = ins[0]
        out.piece, out.micro = first.piece, first.micro
        tag = self.tag(first.piece, first.micro)
        req, buf = self.post(ins, out, tag)
        if self.ack_at_post:
            self.ack(ins)
            ins = []
        rec = [req, buf, out, time.perf_counter(), ins, False]
        self.inflight.append(rec)
        verb = "send" if isinstance(self, SendActor) else "receive"
        self.poller.add(req, self, rec, f"{verb} {self.task.op_name} (rank "
                                        f"{self.task.attrs['peer']}, tag {tag}, iteration "
                                        f"{first.piece})", self.task.attrs.get("group") or "")

    def post(self, ins: list, out, tag: int):
        """Post the non-blocking call; ``(request, buffer it uses)``."""
        raise NotImplementedError

    def ack(self, ins: list) -> None:
        me = self.id
        for r in ins:
            self.producer_puts[r.desc_id]((ACK, me, r.producer, r))

    def finish(self, rec) -> None:
        """The transfer completed: emit the register, ack the inputs (a profiled act spans
        from posting to completion)."""
        _, _, out, posted, ins, _ = rec
        prof = _profiler.ACTIVE
        if prof is not None:
            prof.record(self, out.piece, posted, time.perf_counter())
        self.acts += 1
        self.emit(out)
        self.ack(ins)

    def try_leave(self) -> bool:
        return False if self.inflight else super().try_leave()


class SendActor(_TransferActor):
    """Posts ``Isend`` of its input register; acks it once the transfer completed."""

    def init(self) -> None:
        super().init()
        self.steps = [view_step(*s) for s in self.task.input_views.get(0, ())]

    def post(self, ins: list, out, tag: int):
        k, i = self.input_pos[0]
        a = ins[k].arrays[i]
        for step in self.steps:
            a = step(a)
        a = np.ascontiguousarray(a)
        return self.comm.Isend(a, dest=self.peer, tag=tag), a


class RecvActor(_TransferActor):
    """Posts ``Irecv`` into a free register when the iteration's tick arrived (acking the
    tick at once); emits the register once the data is there."""

    ack_at_post = True

    def post(self, ins: list, out, tag: int):
        buf = out.arrays[0]
        return self.comm.Irecv(buf, source=self.peer, tag=tag), buf


ACTOR_KINDS["send"] = SendActor
ACTOR_KINDS["recv"] = RecvActor

__all__ = ["SendActor", "RecvActor", "TransferPoller"]
