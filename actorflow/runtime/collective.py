"""CollectiveActor: runs the collective tasks of a rank's Plan in their fixed order.

The compiler puts every task whose op calls an MPI collective on the rank's ``comm`` thread
and numbers them in Job order (``compiler/collective.py``). Ranks must enter collectives in
the same order, so a collective actor acts only when it is ready *and* its number is the next
in the sequence; a ready actor that is not next waits. After acting it passes the turn on:
it sends the next actor in the sequence a wake-up (``START``, handled like any message: the
actor tries to act and, at shutdown, to leave), and after the last it starts again with the
first for the next iteration. All collective actors of a Plan live on one thread, so the
schedule needs no lock. The kernels themselves call MPI through the watchdog
(``distributed.watchdog.guarded``), so a rank that fails makes every rank stop in bounded time.
"""
from __future__ import annotations

from actorflow.runtime.actors import ACTOR_KINDS, KernelActor
from actorflow.runtime.message import START


class CollectiveSchedule:
    """The turn of one runtime's collective actors: the number of the next one to act."""

    __slots__ = ("next", "count", "ids")

    def __init__(self, count: int):
        self.next = 0
        self.count = count
        self.ids: dict = {}  # sequence number -> task id


class CollectiveActor(KernelActor):
    """A kernel actor that acts in its turn only (see the module docstring)."""

    def init(self) -> None:
        super().init()
        self.seq = int(self.task.attrs["collective_seq"])
        sched = getattr(self.rt, "collective_schedule", None)
        if sched is None:
            sched = self.rt.collective_schedule = CollectiveSchedule(
                int(self.task.attrs["collective_count"]))
        sched.ids[self.seq] = self.id
        self.sched = sched

    def act_until_fail(self) -> None:
        sched = self.sched
        acted = False
        while self.n_ready == self.n_in and self.free and sched.next == self.seq:
            self.act()
            sched.next = (self.seq + 1) % sched.count
            acted = True
        if acted and sched.count > 1:
            self.send((START, self.id, sched.ids[sched.next], None))


ACTOR_KINDS["collective"] = CollectiveActor

__all__ = ["CollectiveActor", "CollectiveSchedule"]
