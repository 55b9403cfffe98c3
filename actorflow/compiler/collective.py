"""Collective tasks: the ops whose kernels call MPI collectives (registry trait
``collective``: the boxing ops that move data) get a task kind and a stream of their own, and
a fixed order.

Ranks must issue collectives on a communicator in the same order or they deadlock, and actors
on different threads act in no fixed order. So every collective task goes on the rank's
``comm`` thread and is numbered in Job order (``attrs["collective_seq"]``, out of
``attrs["collective_count"]``); the runtime's ``CollectiveActor``
(``actorflow.runtime.collective``) acts them strictly in that sequence, iteration after
iteration (with gradient accumulation: the micro-batch collectives once per micro-batch,
between the ``pre`` and ``post`` ones; see ``number_tasks``) - OneFlow's collective-boxing
executor keeps a static schedule the same way. Every rank traces the same program into the same
Job order, so the sequences agree.
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


def number_tasks(tasks: list, stages: dict | None = None, n: int = 1) -> None:
    """Number the collective tasks of a Plan in the order every rank runs them.

    Without gradient accumulation that is Job order. With ``n`` micro-batches it is the order
    of the reference executor (``job/schedule.py``): the ``pre`` collectives in Job order, then
    the ``micro`` ones (``time_shape == n``) in Job order once per micro-batch, then the
    ``post`` ones. Each task gets ``collective_seq`` (its place among the collectives, pre,
    micro, post) and ``collective_count``, ``collective_pre``, ``collective_micro`` and
    ``collective_n``, from which ``CollectiveSchedule`` unrolls one iteration's sequence.
    """
    stages = stages or {}
    coll = [t for t in tasks if t.kind == KIND]
    pre, micro, post = [], [], []
    for t in coll:
        if t.time_shape > 1:
            if t.time_shape != n:
                raise ValueError(f"compiler: collective {t.op_name} acts {t.time_shape} times "
                                 f"per iteration, expected 1 or {n} (micro-batches)")
            micro.append(t)
        elif stages.get(t.op_name) == "pre":
            pre.append(t)
        else:
            post.append(t)
    for k, t in enumerate(pre + micro + post):
        t.attrs["collective_seq"] = k
        t.attrs["collective_count"] = len(coll)
        t.attrs["collective_pre"] = len(pre)
        t.attrs["collective_micro"] = len(micro)
        t.attrs["collective_n"] = n if micro else 1


__all__ = ["is_collective", "number_tasks", "KIND", "STREAM"]
