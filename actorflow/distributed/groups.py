"""Communicators for global tensors: one per set of ranks (a placement's), used by the boxing
kernels on the communication worker, and the control communicator that the caller's thread
uses to agree on metadata (shard shapes, seeds) without interleaving with the worker's
collectives."""
from __future__ import annotations

from actorflow.distributed import watchdog
from actorflow.distributed.world import world

_groups: dict = {}


def comm_for(ranks: tuple):
    """The communicator of ``ranks`` (in that order), or None in a world of one. Call it on
    the communication worker of a rank in ``ranks`` (making one is collective over them, and
    the worker runs in the same order on every rank)."""
    w = world()
    if w.comm is None:
        return None
    ranks = tuple(ranks)
    if ranks == tuple(range(w.size)):
        return w.comm
    c = _groups.get(ranks)
    if c is None:
        group = w.comm.Get_group().Incl(list(ranks))
        with watchdog.guarded("make a communicator", f"ranks {list(ranks)}"):
            c = w.comm.Create_group(group)
        _groups[ranks] = c
    return c


def control():
    """The control communicator (a duplicate of the world's), or None in a world of one: for
    metadata exchanges made by the caller's thread, all ranks in program order."""
    return world().control


def allgather_object(value, what: str):
    """Every rank's ``value`` (a list indexed by rank), over the control communicator."""
    c = control()
    if c is None:
        return [value]
    with watchdog.guarded(what):
        return c.allgather(value)


def bcast_object(value, root: int, what: str):
    """Rank ``root``'s ``value`` on every rank, over the control communicator."""
    c = control()
    if c is None:
        return value
    with watchdog.guarded(what):
        return c.bcast(value, root=root)
