"""Communicators for global tensors: one per set of ranks (a placement's), used by the boxing
kernels on the communication worker, and the control communicator that the caller's thread
uses to agree on metadata (shard shapes, seeds) without interleaving with the worker's
collectives.

Without a control communicator (a world of one, or a ``world.simulate_rank`` world) the
exchanges are a loopback: every rank is taken to pass what this one does."""
from __future__ import annotations

from actorflow.process import watchdog
from actorflow.process.world import world

_groups: dict = {}


def comm_for(ranks: tuple, key: str | None = None):
    """The communicator of ``ranks`` (in that order), or None in a world of one. Call it on
    the communication worker of a rank in ``ranks`` (making one is collective over them, and
    the worker runs in the same order on every rank). ``key``: a communicator that
    ``make_group(ranks, key)`` made (a graph's own)."""
    w = world()
    if w.comm is None:
        return None
    ranks = tuple(ranks)
    if key is not None:
        c = _groups.get((ranks, key))
        if c is None:
            raise RuntimeError(f"no communicator {key!r} for ranks {list(ranks)} was made on "
                               f"this rank")
        return c
    if ranks == tuple(range(w.size)):
        return w.comm
    c = _groups.get(ranks)
    if c is None:
        group = w.comm.Get_group().Incl(list(ranks))
        with watchdog.guarded("make a communicator", f"ranks {list(ranks)}"):
            c = w.comm.Create_group(group)
        _groups[ranks] = c
    return c


def make_group(ranks: tuple, key: str) -> None:
    """Make communicator ``key`` of ``ranks`` (once) from the control communicator: called on
    the caller's thread, by every rank of ``ranks`` in the same program order (a graph's
    trace), so it never interleaves with the communication worker's collectives."""
    c = control()
    ranks = tuple(ranks)
    if c is None or (ranks, key) in _groups:
        return
    group = c.Get_group().Incl(list(ranks))
    with watchdog.guarded("make a communicator", f"{key} ranks {list(ranks)}"):
        _groups[(ranks, key)] = c.Create_group(group)


def control():
    """The control communicator (a duplicate of the world's), or None in a world of one: for
    metadata exchanges made by the caller's thread, all ranks in program order."""
    return world().control


def allgather_object(value, what: str):
    """Every rank's ``value`` (a list indexed by rank), over the control communicator."""
    c = control()
    if c is None:  # (the loopback: see the module docstring)
        return [value] * world().size
    with watchdog.guarded(what):
        return c.allgather(value)


def bcast_object(value, root: int, what: str):
    """Rank ``root``'s ``value`` on every rank, over the control communicator."""
    c = control()
    if c is None:
        return value
    with watchdog.guarded(what):
        return c.bcast(value, root=root)
