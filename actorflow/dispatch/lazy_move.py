"""Moves between placements inside a distributed ``nn.Graph``: pipeline parallelism.

``to_global(placement=other)`` of a global lazy tensor (and so the gradient of such a move,
which moves back) becomes, in each rank's physical Job:

* on the source placement's ranks: the boxing to broadcast (``box_to``; tagged ``keep``, as
  the other source ranks read nothing of it but must take part), then on its first rank one
  ``pipe_send`` per target rank that is not a source rank;
* on the target placement's ranks: a ``pipe_recv`` of the whole tensor from the source's first
  rank - or, on a rank of both placements, which holds the whole tensor after the boxing
  already, a local ``copy`` of it - then the (local) boxing from broadcast to the target sbp;
* on other ranks: nothing; the result is a global lazy tensor with no shard here.

So placements may share ranks (``[0, 1] -> [1]``, ``[0] -> [0, 1]``, ``[0, 1] -> [1, 0]``) and
be n-d (broadcast is all-broadcast on every hierarchy axis).

The transfer ops carry the transfer's number in the trace (every rank traces the same calls in
the same order, also the calls of ops it does not run, so the numbers agree), which makes
their tag, and the graph's own communicator of the two placements' ranks. The compiler makes
them send/recv tasks (``compiler/transfer.py``), the runtime non-blocking transfers
(``runtime/transfer.py``); the reference executor runs the blocking kernels in Job order.

Ops whose placement leaves out this rank are not traced here at all
(``lazy_global.LazyGlobalInterpreter.apply``): each rank's Job holds its own stage.
"""
from __future__ import annotations

from actorflow import scope
from actorflow.dispatch import global_tensor as gt
from actorflow.framework.sbp_parallel import nd_attrs
from actorflow.process import groups
from actorflow.process.world import world
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import as_sbp_tuple
from actorflow.ops import registry
from actorflow.ops.boxing import B
from actorflow.ops.transfer import TAG_SPAN
from actorflow.tensor import Tensor

_MAX_TRANSFERS = (1 << 15) // TAG_SPAN


def _group(tracer, ranks: tuple) -> str:
    """The key of the graph's communicator of ``ranks`` for transfers (made on first use)."""
    train = tracer.job.train
    key = train.get("p2p_group")
    if key is None:
        from actorflow.dispatch.lazy_global import interpreter_for

        base = interpreter_for(tracer).group_key()
        key = train["p2p_group"] = f"{base}_p2p"
    made = tracer.__dict__.setdefault("_p2p_groups", set())
    if ranks not in made:
        groups.make_group(ranks, key)
        made.add(ranks)
    return key


def move(t: Tensor, dst_pl: placement, sbp) -> Tensor:
    """Global lazy ``t`` on placement ``dst_pl`` laid out as ``sbp`` (see the module
    docstring); records the ``boxing_move`` autograd node, whose gradient moves back."""
    from actorflow.dispatch.lazy_global import (LazyGlobalBlob, _shard, global_lazy,
                                                global_tags, interpreter_for)

    h = t._h
    tr = h.tracer
    src_pl = h.placement
    sbp = as_sbp_tuple(sbp, "to_global")
    if len(sbp) != len(dst_pl.hierarchy):
        raise ValueError(f"nn.Graph: to_global with {len(sbp)} sbp on placement {dst_pl} of "
                         f"hierarchy {dst_pl.hierarchy}: give one sbp per hierarchy axis")
    number = tr.__dict__.get("_n_moves", 0)
    tr.__dict__["_n_moves"] = number + 1
    if number >= _MAX_TRANSFERS:
        raise NotImplementedError(f"nn.Graph: more than {_MAX_TRANSFERS} moves between "
                                  f"placements in one graph")
    interp = interpreter_for(tr)
    rank = world().rank
    src_ranks, dst_ranks = src_pl.flat_ranks, dst_pl.flat_ranks
    root = src_ranks[0]
    whole_src, whole_dst = (B,) * len(src_pl.hierarchy), (B,) * len(dst_pl.hierarchy)
    dst = nd_attrs(sbp)
    reason = f"to_global in {scope.current_path() or 'build'}"
    shape, dtype = tuple(t._shape), t.dtype
    common_attrs = {"tag": number * TAG_SPAN}
    blob = None
    full_dst = None  # the whole tensor on this rank as a tensor of the target placement
    if rank in src_ranks:
        start = len(tr.job.ops)
        full = interp.box_to(t, whole_src, reason) if nd_attrs(h.sbp) != whole_src else t
        for conf in tr.job.ops[start:]:  # the other source ranks take part, read nothing
            conf.tags["keep"] = True
        if rank == root:
            for peer in dst_ranks:
                if peer in src_ranks:  # it has the whole tensor already
                    continue
                ranks = tuple(sorted((rank, peer)))
                attrs = dict(common_attrs, peer=peer, ranks=ranks, group=_group(tr, ranks))
                start = len(tr.job.ops)
                tr.apply(registry.get("pipe_send"), [_shard(tr, full._h.name)], attrs, None,
                         False)
                for conf in tr.job.ops[start:]:
                    conf.tags["global"] = global_tags(src_pl, (whole_src,), (whole_src,),
                                                      [(0,)])
                    conf.tags["transfer"] = {"to": peer, "bytes": t.numel() * dtype.itemsize,
                                             "reason": reason}
        if rank in dst_ranks:  # in both placements: a local copy onto the target
            start = len(tr.job.ops)
            got = tr.apply(registry.get("copy"), [_shard(tr, full._h.name)], {}, None,
                           False)[0][0]
            for conf in tr.job.ops[start:]:
                conf.tags["global"] = global_tags(dst_pl, (whole_src,), (whole_dst,), [shape])
            full_dst = got._h.name
    elif rank in dst_ranks:
        ranks = tuple(sorted((rank, root)))
        attrs = dict(common_attrs, peer=root, ranks=ranks, group=_group(tr, ranks),
                     shape=shape, dtype=dtype.name)
        start = len(tr.job.ops)
        got = tr.apply(registry.get("pipe_recv"), [], attrs, None, False)[0][0]
        for conf in tr.job.ops[start:]:
            conf.tags["global"] = global_tags(dst_pl, (), (whole_dst,), [shape])
            conf.tags["transfer"] = {"from": root, "bytes": t.numel() * dtype.itemsize,
                                     "reason": reason}
        full_dst = got._h.name
    if full_dst is not None:
        full = global_lazy(tr, full_dst, dst_pl, whole_dst, shape, dtype)
        out = interp.box_to(full, dst, reason) if dst != whole_dst else full
        blob = out._h.name
    out = Tensor._from_handle(LazyGlobalBlob(tr, blob, dst_pl, tuple(sbp)), shape, dtype)
    gt._record("boxing_move", [t], [out], {"in_ranks": src_pl.flat_ranks,
                                            "in_hierarchy": src_pl.hierarchy,
                                            "in_sbp": nd_attrs(h.sbp)})
    return out


__all__ = ["move"]
