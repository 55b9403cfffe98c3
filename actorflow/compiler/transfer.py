"""Send/recv tasks: the ops with the registry trait ``transfer`` (``pipe_send``, ``pipe_recv``,
the two halves of a move between placements in a distributed graph) become tasks of kind
``send`` / ``recv`` on the rank's ``p2p`` stream (a thread of its own). Their actors
(``actorflow.runtime.transfer``) post non-blocking MPI calls and act again when they complete,
so a transfer never blocks the thread and sends and receives of several iterations overlap.
Unlike collectives they need no common order: a message is matched by its peer, communicator
and tag (the transfer's number and the iteration).
"""
from __future__ import annotations

from actorflow.ops import registry

STREAM = "p2p"
_KINDS = {"pipe_send": "send", "pipe_recv": "recv"}


def transfer_kind(op_type: str) -> str | None:
    """``"send"`` / ``"recv"`` for a transfer op, else None."""
    try:
        op = registry.get(op_type)
    except KeyError:
        return None
    return _KINDS.get(op_type) if op.transfer else None


def pipeline_regst_num(job, n_micro: int) -> int:
    """Registers per output of the per-micro-batch tasks of a Job with transfers (a pipeline
    stage) under ``n_micro`` accumulation steps, else 0. A stage keeps each micro-batch's
    activations until its backward, which waits for the later stages; with one register the
    next micro-batch's forward would wait too, and the stages would run in lockstep. Two let
    this stage run the next micro-batch's forward while the next stage works on the previous
    one (OneFlow sizes a stage's buffers by the stages after it)."""
    if n_micro <= 1 or not any(transfer_kind(o.op_type) for o in job.ops):
        return 0
    return min(n_micro, 2)


__all__ = ["transfer_kind", "pipeline_regst_num", "STREAM"]
