"""Actor threads: a Python thread polling a channel (OneFlow's ``Thread::PollMsgChannel``).

A message sent from an actor on this same thread goes to the thread's local queue without
touching the channel; other threads put messages on the channel. The thread handles
``CONSTRUCT_ACTOR`` and ``STOP_THREAD`` itself and hands every other message to its actor.
"""
from __future__ import annotations

import queue
import threading
from collections import deque

from actorflow.compiler.task_id import describe_thread
from actorflow.process import watchdog
from actorflow.runtime.message import CONSTRUCT_ACTOR, STOP_THREAD


class ActorThread:
    """One runtime thread (see the module docstring)."""

    def __init__(self, thread_id: int, runtime):
        self.thread_id = thread_id
        self.name = describe_thread(thread_id)
        self.rt = runtime
        self.channel: queue.SimpleQueue = queue.SimpleQueue()
        self.local: deque = deque()
        self.actors: dict = {}
        self.ident = None
        self.thread = threading.Thread(target=self._poll, name=f"actorflow-{self.name}",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def enqueue(self, msg) -> None:
        if threading.get_ident() == self.ident:
            self.local.append(msg)
        else:
            self.channel.put(msg)

    def _poll(self) -> None:
        self.ident = threading.get_ident()
        self.rt.thread_started(self)
        local, channel, actors, rt = self.local, self.channel, self.actors, self.rt
        # a graph collective waiting on this thread leaves once the runtime aborted
        watchdog.set_stopped_check(lambda: rt.aborted)
        try:
            while True:
                if local:
                    msg = local.popleft()
                else:
                    msg = channel.get()
                if rt.aborted:
                    return
                kind = msg[0]
                if kind == STOP_THREAD:
                    return
                if kind == CONSTRUCT_ACTOR:
                    task = msg[3]
                    actors[task.task_id] = rt.construct_actor(task)
                    rt.actor_constructed()
                    continue
                actor = actors.get(msg[2])
                if actor is None:
                    continue  # a late message to an actor that already left
                if actor.process(msg):
                    del actors[msg[2]]
                    rt.actor_exited(actor)
        except BaseException as e:  # a kernel error or a bug: tear the runtime down
            rt.abort(e)
