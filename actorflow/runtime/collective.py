"""CollectiveActor: runs the collective tasks of a rank's Plan in their fixed order.

The compiler puts every task whose op calls an MPI collective on the rank's ``comm`` thread and
numbers them in Job order (``compiler/collective.py``). Ranks must enter collectives in the
same order, so a collective actor acts only when it is ready *and* its number is the next in
the sequence; a ready actor that is not next waits. After acting it passes the turn on: it
sends the next actor in the sequence a wake-up (``START``, handled like any message: the actor
tries to act and, at shutdown, to leave), and after the last it starts again with the first for
the next iteration. With gradient accumulation the sequence of one iteration is the ``pre``
collectives, the ``micro`` ones once per micro-batch, then the ``post`` ones. All collective
actors of a Plan live on one thread, so the schedule needs no lock. The kernels themselves post
non-blocking MPI and complete it through ``process.watchdog.wait``: when another rank's
call of the graph failed (its failure notice) or the peer does not answer within
``ACTORFLOW_COMM_TIMEOUT``, the wait raises ``RemoteRankError``, which aborts this runtime (the
pending calls fail with it), so a rank that fails makes every rank's call raise in bounded
time.
"""
from __future__ import annotations

from actorflow.runtime.actors import ACTOR_KINDS, KernelActor
from actorflow.runtime.message import START


class CollectiveSchedule:
    """The turn of one runtime's collective actors: one iteration's sequence of collective
    numbers (the ``pre`` ones, the ``micro`` ones once per micro-batch, the ``post`` ones; see
    ``compiler.collective.number_tasks``) and the position of the next to act."""

    __slots__ = ("pos", "order", "ids")

    def __init__(self, count: int, pre: int = 0, micro: int = 0, n: int = 1):
        mid = list(range(pre, pre + micro))
        self.order = list(range(pre)) + mid * n + list(range(pre + micro, count))
        self.pos = 0
        self.ids: dict = {}  # sequence number -> task id

    @property
    def next(self) -> int:
        """The number of the collective whose turn it is."""
        return self.order[self.pos]

    def advance(self) -> None:
        """Pass the turn on (after the last, to the first of the next iteration)."""
        self.pos = (self.pos + 1) % len(self.order)


class CollectiveActor(KernelActor):
    """A kernel actor that acts in its turn only (see the module docstring)."""

    def init(self) -> None:
        super().init()
        a = self.task.attrs
        self.seq = int(a["collective_seq"])
        sched = getattr(self.rt, "collective_schedule", None)
        if sched is None:
            sched = self.rt.collective_schedule = CollectiveSchedule(
                int(a["collective_count"]), int(a.get("collective_pre", 0)),
                int(a.get("collective_micro", 0)), int(a.get("collective_n", 1)))
        sched.ids[self.seq] = self.id
        self.sched = sched

    def act_until_fail(self) -> None:
        sched = self.sched
        acted = False
        while self.n_ready == self.n_in and self.free and sched.next == self.seq:
            self.act()
            sched.advance()
            acted = True
        if acted and sched.ids[sched.next] != self.id:
            self.send((START, self.id, sched.ids[sched.next], None))


ACTOR_KINDS["collective"] = CollectiveActor

__all__ = ["CollectiveActor", "CollectiveSchedule"]
