"""Collective tasks: the ops whose kernels call MPI collectives (registry trait
``collective``: the boxing ops that move data) get a task kind and a stream of their own, and
a fixed order.

Ranks must issue collectives on a communicator in the same order or they deadlock, and actors
on different threads act in no fixed order. So every collective task goes on the rank's
``comm`` thread and is numbered in Job order (``attrs["collective_seq"]``, out of
``attrs["collective_count"]``); the runtime's ``CollectiveActor``
(``actorflow.runtime.collective``) acts them strictly in that sequence, iteration after
iteration - OneFlow's collective-boxing executor keeps a static schedule the same way. Every
rank traces the same program into the same Job order, so the sequences agree.
"""
from __future__ import annotations

from actorflow.ops import registry

KIND = "collective"
STREAM = "comm"


def is_collective(op_type: str) -> bool:
    """Whether ops of ``op_type`` call a collective (a registered op with the trait)."""
    try:
        return registry.get(op_type).collective
    except KeyError:
        return False


def number_tasks(tasks: list) -> None:
    """Number the collective tasks of a Plan in the order they were made (Job order)."""
    coll = [t for t in tasks if t.kind == KIND]
    for k, t in enumerate(coll):
        if t.time_shape != 1:
            raise NotImplementedError(f"compiler: collective {t.op_name} runs per micro-batch; "
                                      f"gradient accumulation in a distributed graph is not "
                                      f"supported yet")
        t.attrs["collective_seq"] = k
        t.attrs["collective_count"] = len(coll)


__all__ = ["is_collective", "number_tasks", "KIND", "STREAM"]
