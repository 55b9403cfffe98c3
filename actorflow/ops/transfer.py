"""Point-to-point transfers between ranks: the two halves of a move between placements inside
a distributed ``nn.Graph`` (pipeline parallelism).

``pipe_send`` sends its input (the whole logical tensor, on the source placement's first rank)
to one rank of the target placement; ``pipe_recv`` receives it there. Attrs: ``peer`` (the
other rank, a world rank), ``ranks`` (the ranks of both placements, sorted: the communicator
the pair uses, ``group`` names the graph's own), ``tag`` (the transfer's number in the Job
times ``TAG_SPAN``: it identifies the register's transfer; the runtime adds the iteration),
``shape`` and ``dtype`` (recv). Both have the trait ``transfer``: never folded or removed,
and the compiler makes them send/recv tasks on the rank's ``p2p`` stream, whose actors post
non-blocking MPI calls (``actorflow.runtime.transfer``). The kernels here are the form the
reference executor (ops in Job order) runs: a non-blocking call completed by
``watchdog.wait`` (it raises if another rank's call of the graph failed). ``pipe_send``'s
output is an empty marker (the register that tells the iteration the transfer is done).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import comm_wait
from actorflow.ops.registry import Meta, OpError, register
from actorflow.process import groups

TAG_SPAN = 256  # iterations a tag tells apart; a Job holds at most 2**15 // TAG_SPAN transfers


def comm_and_peer(attrs: dict):
    """(communicator, the peer's index in it) of a transfer op, or (None, None) in a world of
    one."""
    c = groups.comm_for(tuple(attrs["ranks"]), attrs.get("group"))
    if c is None:
        return None, None
    return c, list(attrs["ranks"]).index(int(attrs["peer"]))


def _wait(request, what: str, attrs: dict, a: np.ndarray) -> None:
    comm_wait(request, what, lambda: f"to/from rank {attrs['peer']} tag {attrs['tag']} "
                                     f"{tuple(a.shape)} {a.dtype}", attrs, (a,))


pipe_send = register(
    "pipe_send", transfer=True,
    doc="Send the input to rank ``peer`` (one half of a move between placements in a graph); "
        "the output is an empty marker.")


@pipe_send.infer
def _(inputs, attrs):
    return [Meta((0,), inputs[0].dtype)]


@pipe_send.kernel("cpu")
def _(ins, outs, attrs):
    c, peer = comm_and_peer(attrs)
    if c is None:
        raise OpError("pipe_send: a transfer between ranks needs several processes")
    a = np.ascontiguousarray(ins[0])
    _wait(c.Isend(a, dest=peer, tag=int(attrs["tag"])), "pipe_send", attrs, a)


@pipe_send.sbp
def _(inputs, attrs):
    raise OpError("pipe_send runs on a shard inside a graph; move a global tensor with "
                  "to_global(placement=...)")


pipe_recv = register(
    "pipe_recv", transfer=True,
    doc="Receive the tensor rank ``peer`` sends (the other half of a move between placements "
        "in a graph): attrs shape and dtype.")


@pipe_recv.infer
def _(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), dt.as_dtype(attrs["dtype"]))]


@pipe_recv.kernel("cpu")
def _(ins, outs, attrs):
    c, peer = comm_and_peer(attrs)
    if c is None:
        raise OpError("pipe_recv: a transfer between ranks needs several processes")
    out = outs[0]
    buf = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    _wait(c.Irecv(buf, source=peer, tag=int(attrs["tag"])), "pipe_recv", attrs, buf)
    if buf is not out:
        out[...] = buf


__all__ = ["pipe_send", "pipe_recv", "comm_and_peer", "TAG_SPAN"]
