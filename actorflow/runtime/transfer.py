"""Send and recv actors: the two halves of a move between placements in a distributed graph,
on the rank's ``p2p`` thread (``compiler/transfer.py``), with the read/ack protocol carried
across processes.

* ``SendActor`` acts when its input register arrived and a marker register is free: it posts
  ``Isend`` of the register's array and keeps the input register. Only when the transfer
  completed does it ack the input (so the producer's register is free again) and emit the
  marker. That is what lets ``regst_num > 1`` pipeline across ranks: the producer on this
  rank fills its next register while the previous one is still on the wire.
* ``RecvActor`` acts when the iteration's tick arrived and one of its registers is free: it
  posts ``Irecv`` into that register; when the data arrived it emits the register to its
  consumers, who ack it as any register.

The tag of a message is the transfer's number (``attrs["tag"]``, a multiple of ``TAG_SPAN``)
plus the iteration (and micro-batch) modulo ``TAG_SPAN``, so both sides name the same register
of the same iteration. One ``TransferPoller`` thread per runtime tests the posted requests and
wakes the actor (a ``START`` message carrying the request) on its own thread when one
completes; a request pending past ``ACTORFLOW_COMM_TIMEOUT`` makes the watchdog abort every
rank, naming the transfer, so a rank that failed never leaves the other one waiting.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from actorflow.compiler.task_id import thread_id_of
from actorflow.distributed import watchdog
from actorflow.ops.transfer import TAG_SPAN, comm_and_peer
from actorflow.runtime.actors import ACTOR_KINDS, Actor
from actorflow.runtime.message import START


class TransferPoller:
    """Tests a runtime's pending non-blocking transfers (see the module docstring)."""

    def __init__(self, rt):
        self.rt = rt
        self.pending: list = []   # [request, actor, token, what, posted at]
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="actorflow-p2p-poller",
                                       daemon=True)
        self.thread.start()

    def add(self, request, actor, token, what: str) -> None:
        """Watch ``request``; when it completes, wake ``actor`` with ``token``."""
        with self.cond:
            self.pending.append([request, actor, token, what, time.monotonic()])
            self.cond.notify()

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
                return
            done = [w for w in work if w[0].Test()]
            if done:
                with self.cond:
                    for w in done:
                        self.pending.remove(w)
                for _, actor, token, _, _ in done:
                    rt.threads[thread_id_of(actor.id)].enqueue((START, actor.id, actor.id,
                                                                 token))
                continue
            now, limit = time.monotonic(), watchdog.timeout()
            for _, _, _, what, t0 in work:
                if now - t0 > limit:
                    watchdog.abort(f"{what} did not complete in {now - t0:.1f} s "
                                   f"({watchdog.TIMEOUT_VAR}={limit:g}): the other rank failed "
                                   f"or exited; aborting every rank")
            time.sleep(0.0002)


def _poller(rt) -> TransferPoller:
    p = getattr(rt, "transfer_poller", None)
    if p is None:
        p = rt.transfer_poller = TransferPoller(rt)
    return p


class _TransferActor(Actor):
    """What send and recv share: one transfer in flight at a time, finished by the poller's
    wake-up (``START`` with the request as its payload)."""

    def init(self) -> None:
        a = self.task.attrs
        self.comm, self.peer = comm_and_peer(a)
        self.base_tag = int(a["tag"])
        self.n_micro = int(self.task.time_shape)
        self.busy = None
        self.poller = _poller(self.rt)

    def tag(self, piece: int, micro: int) -> int:
        return self.base_tag + (piece * self.n_micro + micro) % TAG_SPAN

    def process(self, msg) -> bool:
        if msg[0] == START and msg[3] is not None and msg[3] is self.busy:
            self.finish()
        return super().process(msg)

    def act_until_fail(self) -> None:
        if self.busy is None and self.n_ready == self.n_in and self.free and self.n_in:
            self.act()

    def what(self, verb: str, piece: int) -> str:
        t = self.task
        return (f"{verb} {t.op_name} (rank {self.peer_rank()}, tag {self.tag(piece, 0)}, "
                f"iteration {piece})")

    def peer_rank(self) -> int:
        return int(self.task.attrs["peer"])


class SendActor(_TransferActor):
    """Posts ``Isend`` of its input register; acks it once the transfer completed."""

    def act(self) -> None:
        ins = [self.inbox[rid][0] for rid in self.in_rids]
        k, i = self.input_pos[0]
        src = ins[k]
        a = np.ascontiguousarray(src.arrays[i])
        out = self.free.popleft()
        out.piece, out.micro = src.piece, src.micro
        req = self.comm.Isend(a, dest=self.peer, tag=self.tag(src.piece, src.micro))
        self.busy = (req, a, out)
        self.poller.add(req, self, self.busy, self.what("send", src.piece))

    def finish(self) -> None:
        _, _, out = self.busy
        self.busy = None
        self.acts += 1
        self.emit(out)
        self.ack_inputs()


class RecvActor(_TransferActor):
    """Posts ``Irecv`` into a free register when the iteration's tick arrived; emits it once
    the data is there."""

    def act(self) -> None:
        tick = self.inbox[self.in_rids[0]][0]
        out = self.free.popleft()
        out.piece, out.micro = tick.piece, tick.micro
        buf = out.arrays[0]
        req = self.comm.Irecv(buf, source=self.peer, tag=self.tag(tick.piece, tick.micro))
        self.busy = (req, buf, out)
        self.poller.add(req, self, self.busy, self.what("receive", tick.piece))

    def finish(self) -> None:
        _, _, out = self.busy
        self.busy = None
        self.acts += 1
        self.emit(out)
        self.ack_inputs()


ACTOR_KINDS["send"] = SendActor
ACTOR_KINDS["recv"] = RecvActor

__all__ = ["SendActor", "RecvActor", "TransferPoller"]
