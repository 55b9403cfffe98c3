"""ActorMsgBus: routes a message by its destination actor id to the thread that runs it (the
thread id is part of the task id). A Plan holds one rank's tasks only: there is no transport to
other ranks in the runtime (graphs run in one process; see docs/architecture.md)."""
from __future__ import annotations

from actorflow.compiler.task_id import thread_id_of


class ActorMsgBus:
    """``send(msg)`` enqueues ``msg`` on the thread of actor ``msg[2]``."""

    def __init__(self, threads: dict):
        self.threads = threads
        self._route: dict = {}

    def register(self, actor_id: int) -> None:
        self._route[actor_id] = self.threads[thread_id_of(actor_id)]

    def route_from(self, sender_thread, dst: int):
        """A function that enqueues a message for actor ``dst`` sent by an actor running on
        ``sender_thread``: the local queue when both live on the same thread, else the target
        thread's channel. Actors resolve their routes once, so the hot path is one call."""
        target = self.threads[thread_id_of(dst)]
        return target.local.append if target is sender_thread else target.channel.put

    def send(self, msg) -> None:
        thread = self._route.get(msg[2])
        if thread is None:
            thread = self.threads[thread_id_of(msg[2])]
            self._route[msg[2]] = thread
        thread.enqueue(msg)
