"""Checks that the ranks agree on what they pass to ``to_global`` (OneFlow's ``check_meta``).

``local_shapes`` is the one exchange ``to_global`` of a local tensor makes: with
``check_meta=True`` every rank sends its local shape and dtype and the placement and sbp it
passed, over the control communicator, and every rank checks the same gathered list, so a
mismatch raises the same ``RuntimeError`` on every rank (naming the ranks and what they hold)
instead of a crash or a hang in a later collective. With ``check_meta=False`` nothing is
exchanged: every rank is taken to hold a tensor of its own shape (OneFlow's documented
contract: same shape and dtype on every rank).
"""
from __future__ import annotations

from actorflow.process import agree, groups
from actorflow.process.world import world
from actorflow.framework.sbp_parallel import shard_range

BALANCED_URL = ("https://github.com/Oneflow-Inc/oneflow/blob/master/oneflow/core/common/"
                "balanced_splitter.h")


def _by_rank(values: dict) -> str:
    return ", ".join(f"rank {r}: {v}" for r, v in values.items())


def balanced(total: int, n: int) -> list:
    """The sizes of ``n`` balanced pieces of ``total`` (the layout of a split dim)."""
    return [b - a for a, b in (shard_range(total, n, k) for k in range(n))]


def local_shapes(shape: tuple, dtype, placement_, sbp: tuple, check_meta: bool) -> tuple:
    """``(shapes, dtype)``: the local shapes of the placement's ranks, in placement order, and
    their dtype, for ``to_global`` of a local tensor of ``shape``/``dtype`` laid out as ``sbp``
    (a 1-tuple of SbpParallel); ranks outside the placement take the placement's. Raises
    ``RuntimeError`` on every rank when ``check_meta`` and the ranks disagree."""
    ranks = placement_.flat_ranks
    n = len(ranks)
    if not check_meta or world().size == 1:
        return [shape] * n, dtype
    mine = (shape, dtype, tuple(s.attr() for s in sbp), ranks, placement_.hierarchy)
    got = groups.allgather_object(mine, "to_global metadata check")
    _agree("placement", {r: f"ranks {g[3]} hierarchy {g[4]}" for r, g in enumerate(got)})
    _agree("sbp", {r: g[2] for r, g in enumerate(got)})
    inside = {r: got[r] for r in ranks}
    _agree("local tensor dtype", {r: str(g[1]) for r, g in inside.items()})
    dtype = inside[ranks[0]][1]
    shapes = [inside[r][0] for r in ranks]
    s = sbp[0]
    held = _by_rank({r: inside[r][0] for r in ranks})
    if not s.is_split:
        if any(x != shapes[0] for x in shapes):
            raise RuntimeError(f"to_global: {s} needs local tensors of one shape; the ranks "
                               f"hold {held}")
        return shapes, dtype
    d = s.dim
    for r, x in zip(ranks, shapes):
        if len(x) != len(shapes[0]):
            raise RuntimeError(f"to_global: local tensors have different numbers of dims: "
                               f"{held}")
        for k, (a, b) in enumerate(zip(shapes[0], x)):
            if k != d and a != b:
                raise RuntimeError(
                    f"to_global: Sizes of tensors must match except in dimension {d}. "
                    f"Expected size {a} but got size {b} for tensor on rank {r}! ({held})")
    if d < len(shapes[0]):
        sizes = [x[d] for x in shapes]
        if sizes != balanced(sum(sizes), n):
            raise RuntimeError(
                f"to_global: Sizes of tensors in dimension {d} must be same or match balanced "
                f"split distribution. See {BALANCED_URL} for details of balanced split (the "
                f"ranks hold {held}; {sum(sizes)} rows split over {n} ranks are "
                f"{balanced(sum(sizes), n)})")
    return shapes, dtype


_INCONSISTENT = {"placement": "Inconsistent parallel description: "}  # OneFlow's words


def _agree(what: str, values: dict) -> None:
    if len(set(values.values())) > 1:
        raise RuntimeError(f"to_global: {_INCONSISTENT.get(what, '')}the ranks passed "
                           f"different {what}s: {_by_rank(values)}")


def check_global(placement_, sbp: tuple) -> None:
    """With ``check_meta=True`` on a global tensor: the ranks passed the same placement and
    sbp (raises ``RuntimeError`` on every rank otherwise)."""
    if world().size == 1:
        return
    got = groups.allgather_object((placement_.flat_ranks, placement_.hierarchy,
                                   tuple(s.attr() for s in sbp)), "to_global metadata check")
    _agree("placement", {r: f"ranks {g[0]} hierarchy {g[1]}" for r, g in enumerate(got)})
    _agree("sbp", {r: g[2] for r, g in enumerate(got)})


def check_created(op: str, shape: tuple, dtype, placement_, sbp) -> None:
    """A global tensor being created from values each rank made itself (``flow.tensor``,
    ``flow.ones(..., placement=)``): raise ``RankMismatchError`` on every rank unless all made
    them of one shape and dtype, on one placement and sbp. Compared once per signature
    (``actorflow.process.agree``): a repeated creation costs a set lookup. Only the ranks of
    the placement take part (the others hold no shard, and may make something else)."""
    if world().size == 1 or not hasattr(placement_, "flat_ranks"):
        return
    ranks = tuple(placement_.flat_ranks)
    if len(ranks) < 2 or world().rank not in ranks:
        return
    groups.make_group(ranks, _CREATION_CHECK)
    sbps = sbp if isinstance(sbp, (list, tuple)) else (sbp,)
    fields = (tuple(shape), str(dtype), tuple(placement_.hierarchy),
              tuple(str(s) for s in sbps))
    agree.check(groups.comm_for(ranks, _CREATION_CHECK), f"{op} on {placement_}", fields,
                 ranks)


_CREATION_CHECK = "global creation check"  # the communicator check_created compares over


__all__ = ["local_shapes", "check_global", "check_created", "balanced"]
