"""Boxing: ops that change a global tensor's SBP over one axis of ranks, and the SBP-rule
helpers the op families use (n-d SBP applies them one hierarchy axis at a time, see
``actorflow.dispatch.nd_sbp``).

Each boxing op takes this rank's shard of a global tensor and writes this rank's shard of the
same logical tensor under another SBP. Attrs: ``shape`` (the logical shape), ``ranks`` (the
placement's ranks, flattened), ``index`` (this rank's position among them) and the split dims
(``in_dim``, ``out_dim``). Splits are uneven as ``numpy.array_split``: along a dim of size
``s`` over ``n`` ranks, the first ``s % n`` ranks hold one entry more. The kernels that move
data call MPI through the placement's communicator (``actorflow.process.groups``; attr
``group`` names a graph's own) and have the trait ``collective`` (a compiled graph runs them
in a fixed order); eagerly they run on the VM's communication worker, in issue order on every
rank. The gradient of a boxing
is the gradient boxed back to the input's SBP (``F.to_global``), so it is exact.

An SBP rule (``@op.sbp``) is ``fn(inputs, attrs) -> iterable of signatures``: ``inputs`` are the
global tensors of a call (logical ``_shape``, ``dtype``, ``sbp``), a signature is ``Sig(ins,
outs)``: one SBP attr per input and per output (``S(d)``, ``B``, ``P``: the attr form of
``actorflow.framework.sbp_parallel``, re-exported here with its layout math), with an
optional ``post(outs, attrs, index, n)`` run on the local results (mean over a split dim scales
them). Running the op's kernel on shards laid out as ``ins`` must give shards laid out as
``outs`` (``inputs[i].placement`` is 1-D, of the size of the axis the rule is asked for); the
eager-global interpreter (``actorflow.dispatch.global_tensor``) picks the signature that moves
the fewest bytes. Every op also runs with all inputs broadcast.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import (  # noqa: F401  (the op families import them here)
    B,
    M,
    P,
    S,
    SbpParallel,
    shard_range,
    shard_shape,
)
from actorflow.ops._common import F, comm_wait
from actorflow.ops.registry import Meta, OpError, register
from actorflow.process import groups

class Sig(NamedTuple):
    """One SBP signature of an op call: input SBPs -> output SBPs (attr tuples). ``local(attrs,
    index, n)``: the attrs of the call on the shards when they differ (a target shape);
    ``post(outs, attrs, index, n)``: a fix-up of the local results (mean's scale)."""

    ins: tuple
    outs: tuple
    post: Callable | None = None
    local: Callable | None = None


def _piece(x: np.ndarray, dim: int, n: int, i: int) -> np.ndarray:
    a, b = shard_range(x.shape[dim], n, i)
    return x[(slice(None),) * dim + (slice(a, b),)]


def _comm(attrs: dict):
    return groups.comm_for(attrs["ranks"], attrs.get("group"))


def _wait(request, name: str, x: np.ndarray, attrs: dict, keep) -> None:
    comm_wait(request, name, lambda: f"shard {tuple(x.shape)} {x.dtype}", attrs, keep)


def _bytes(a: np.ndarray) -> np.ndarray:
    """``a`` (contiguous) as flat bytes: every dtype (half types, bool) travels as MPI.BYTE."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _layout(shapes: list, dtype) -> tuple:
    """(byte counts, byte offsets) of arrays of ``shapes`` laid end to end."""
    counts = [int(np.prod(s, dtype=np.int64)) * dtype.itemsize for s in shapes]
    return counts, [int(v) for v in np.cumsum([0] + counts[:-1])]


def _unpack(buf: np.ndarray, shapes: list, offsets: list, counts: list, dtype) -> list:
    return [buf[o:o + c].view(dtype).reshape(s) for s, o, c in zip(shapes, offsets, counts)]


def _allgather(name: str, x: np.ndarray, attrs: dict, shapes: list | None = None) -> list:
    """Every rank's ``x`` (their ``shapes``; default: all of ``x``'s), through a non-blocking
    all-gather completed by the watchdog's wait (a graph's raises if another rank failed)."""
    c = _comm(attrs)
    if c is None:
        return [x]
    from mpi4py import MPI

    shapes = shapes or [tuple(x.shape)] * c.Get_size()  # x's is shapes[rank]: see _boxing
    send = _bytes(x)
    counts, offsets = _layout(shapes, x.dtype)
    recv = np.empty(sum(counts), np.uint8)
    if len(set(counts)) == 1:
        req = c.Iallgather([send, MPI.BYTE], [recv, MPI.BYTE])
    else:
        req = c.Iallgatherv([send, MPI.BYTE], [recv, counts, offsets, MPI.BYTE])
    _wait(req, name, x, attrs, (send, recv))
    return _unpack(recv, shapes, offsets, counts, x.dtype)


def _alltoall(name: str, pieces: list, shapes: list, attrs: dict) -> list:
    """The pieces every rank sent this one (``shapes``: theirs), for ``pieces`` (one per
    rank), through a non-blocking all-to-all (see ``_allgather``)."""
    c = _comm(attrs)
    if c is None:
        return pieces
    from mpi4py import MPI

    dtype = pieces[0].dtype
    send = np.concatenate([_bytes(p) for p in pieces])
    scounts, soffsets = _layout([p.shape for p in pieces], dtype)
    rcounts, roffsets = _layout(shapes, dtype)
    recv = np.empty(sum(rcounts), np.uint8)
    req = c.Ialltoallv([send, scounts, soffsets, MPI.BYTE], [recv, rcounts, roffsets, MPI.BYTE])
    _wait(req, name, pieces[0], attrs, (send, recv))
    return _unpack(recv, shapes, roffsets, rcounts, dtype)


def _sum(parts: list, out: np.ndarray) -> None:
    """Sum ``parts`` in rank order into ``out`` (half precision accumulates in float32), so
    every rank gets the same bits."""
    if out.dtype == np.bool_:
        acc = np.zeros(out.shape, np.bool_)
        for p in parts:
            acc |= p
    else:
        half = out.dtype.kind == "V" or out.dtype == np.float16
        acc = np.array(parts[0], dtype=np.float32 if half else out.dtype)
        for p in parts[1:]:
            acc += p.astype(acc.dtype) if half else p
    out[...] = acc


def _grad_of_boxing(ctx, dout, back):
    """The gradient of a boxing recorded for autograd: ``dout`` boxed to ``back`` (the sbp
    it had), or ``dout`` as it is with attr ``grad_mode="identity"`` (OneFlow's
    ``hierarchical_parallel_cast`` grad mode; ZeRO stage 3's soft restore)."""
    if ctx.attrs.get("grad_mode", "restore") == "identity":
        return dout
    return F.to_global(dout, sbp=back)


def _boxing(name: str, doc: str, src: str, dst: str, kernel, collective: bool = True) -> None:
    op = register(name, doc=doc, collective=collective)

    @op.infer
    def _(inputs, attrs):
        # the shard must be the one the attrs give: checked here, before anything is queued
        # (a kernel raising on one rank would leave its peers waiting in the collective)
        n, i = len(attrs["ranks"]), attrs["index"]
        mine = shard_shape(attrs["shape"], S(attrs["in_dim"]) if src == "S" else B, n, i)
        if tuple(inputs[0].shape) != mine:
            raise OpError(f"{name}: this rank's shard (index {i} of {n}) is "
                          f"{tuple(inputs[0].shape)}, expected {mine} (of a tensor of shape "
                          f"{tuple(attrs['shape'])})")
        out = S(attrs["out_dim"]) if dst == "S" else (B if dst == "B" else P)
        return [Meta(shard_shape(attrs["shape"], out, n, i), inputs[0].dtype)]

    op.kernel("cpu")(kernel)

    @op.grad
    def _(ctx, dout):
        # boxing is the identity on logical values: box the gradient back to the input's SBP
        return (_grad_of_boxing(ctx, dout, SbpParallel.from_attr(ctx.attrs["in_sbp"])),)

    @op.sbp
    def _(inputs, attrs):
        raise OpError(f"{name} takes the local shard of a global tensor; box a global tensor "
                      f"with to_global(sbp=...)")


def _s_to_b(ins, outs, attrs):
    n, d = len(attrs["ranks"]), attrs["in_dim"]
    shapes = [shard_shape(attrs["shape"], S(d), n, k) for k in range(n)]
    parts = _allgather("boxing S->B (all-gather)", ins[0], attrs, shapes)
    outs[0][...] = np.concatenate(parts, axis=attrs["in_dim"])


def _p_to_b(ins, outs, attrs):
    _sum(_allgather("boxing P->B (all-reduce)", ins[0], attrs), outs[0])


def _pm_to_b(ins, outs, attrs):
    parts = _allgather("boxing partial_max->B (all-reduce max)", ins[0], attrs)
    if outs[0].dtype == np.bool_:
        _sum(parts, outs[0])  # "or"
        return
    half = outs[0].dtype.kind == "V"  # bfloat16: compare as float32
    acc = np.array(parts[0], dtype=np.float32 if half else outs[0].dtype)
    for p in parts[1:]:
        np.maximum(acc, p.astype(acc.dtype) if half else p, out=acc)
    outs[0][...] = acc


def _p_to_s(ins, outs, attrs):
    n, d = len(attrs["ranks"]), attrs["out_dim"]
    x = ins[0]
    mine = shard_shape(x.shape, S(d), n, attrs["index"])
    parts = _alltoall("boxing P->S (reduce-scatter)", [_piece(x, d, n, k) for k in range(n)],
                      [mine] * n, attrs)
    _sum(parts, outs[0])


def _b_to_s(ins, outs, attrs):
    outs[0][...] = _piece(ins[0], attrs["out_dim"], len(attrs["ranks"]), attrs["index"])


def _b_to_p(ins, outs, attrs):
    if attrs["index"] == 0:
        outs[0][...] = ins[0]
    else:
        outs[0][...] = 0


def _s_to_s(ins, outs, attrs):
    n, i, j = len(attrs["ranks"]), attrs["in_dim"], attrs["out_dim"]
    x, me, shape = ins[0], attrs["index"], attrs["shape"]
    shapes = [shard_shape(shard_shape(shape, S(i), n, k), S(j), n, me) for k in range(n)]
    parts = _alltoall("boxing S->S (all-to-all)", [_piece(x, j, n, k) for k in range(n)],
                      shapes, attrs)
    outs[0][...] = np.concatenate(parts, axis=i)


_boxing("boxing_s_to_b", "split(in_dim) -> broadcast: all-gather of the shards (of any sizes) "
        "along in_dim.", "S", "B", _s_to_b)
_boxing("boxing_p_to_b", "partial_sum -> broadcast: all-reduce (sum in rank order).", "P", "B",
        _p_to_b)
_boxing("boxing_pm_to_b", "partial_max -> broadcast: all-reduce max (NaN wins, as torch.max).",
        "M", "B", _pm_to_b)
_boxing("boxing_p_to_s", "partial_sum -> split(out_dim): reduce-scatter.", "P", "S", _p_to_s)
_boxing("boxing_b_to_s", "broadcast -> split(out_dim): this rank's slice, no transfer.", "B", "S",
        _b_to_s, False)
_boxing("boxing_b_to_p", "broadcast -> partial_sum: the first rank keeps the values, the others "
        "hold zeros.", "B", "P", _b_to_p, False)
_boxing("boxing_s_to_s", "split(in_dim) -> split(out_dim): all-to-all.", "S", "S", _s_to_s)

# ---- between placements -------------------------------------------------------------------------

boxing_move = register(
    "boxing_move",
    doc="Move a global tensor to another placement: the source placement's first rank "
        "broadcasts its broadcast (whole) shard over the communicator of the ranks of both "
        "placements. Input: the whole logical tensor on the source ranks (any placeholder on "
        "the others); output: the whole logical tensor. Attrs: shape, ranks (the source's "
        "ranks, then the target's others; the first is the root), index (this rank's "
        "position), in_ranks/in_hierarchy/in_sbp (the source placement and n-d SBP, for the "
        "gradient, which moves back).",
    collective=True)


@boxing_move.infer
def _(inputs, attrs):
    shape = tuple(attrs["shape"])
    if attrs["index"] == 0 and tuple(inputs[0].shape) != shape:  # before anything is queued
        raise OpError(f"boxing_move: the root's input is {tuple(inputs[0].shape)}, the moved "
                      f"tensor {shape}")
    return [Meta(shape, inputs[0].dtype)]


@boxing_move.kernel("cpu")
def _(ins, outs, attrs):
    c = _comm(attrs)
    root = attrs["index"] == 0
    if c is None:
        outs[0][...] = ins[0]
        return
    out = outs[0]
    buf = np.ascontiguousarray(ins[0]) if root else np.empty(out.shape, out.dtype)
    wire = _bytes(buf)
    req = c.Ibcast(wire, root=0)
    _wait(req, "boxing move (broadcast to another placement)", out, attrs, (wire,))
    out[...] = buf


@boxing_move.grad
def _(ctx, dout):
    a = ctx.attrs
    src = placement("cpu", np.array(a["in_ranks"]).reshape(a["in_hierarchy"]).tolist())
    return (F.to_global(dout, placement=src,
                        sbp=tuple(SbpParallel.from_attr(s) for s in a["in_sbp"])),)


@boxing_move.sbp
def _(inputs, attrs):
    raise OpError("boxing_move takes the local shard of a global tensor; move a global tensor "
                  "with to_global(placement=..., sbp=...)")


# ---- between local and global tensors (autograd records these around an alias) -----------------

to_local = register("to_local", doc="The local shard of a global tensor (an alias; recorded by "
                                    "Tensor.to_local for autograd, never dispatched).")


def _not_dispatched(name: str, how: str):
    def infer(inputs, attrs):
        raise OpError(f"{name} is recorded for autograd only; call {how}")
    return infer


to_local.infer(_not_dispatched("to_local", "Tensor.to_local()"))


@to_local.grad
def _(ctx, dout):
    t = ctx.inputs[0]
    return (F.to_global(dout, placement=t.placement, sbp=t.sbp),)


local_to_global = register(
    "local_to_global", doc="A global tensor made of each rank's local tensor (recorded by "
                           "Tensor.to_global for autograd, never dispatched). Attrs: sbp "
                           "(1-D attr, or an n-d tuple of them).")


local_to_global.infer(_not_dispatched("local_to_global", "Tensor.to_global(placement, sbp)"))


@local_to_global.grad
def _(ctx, dout):
    return (_as_input(_local_to_global_grad(ctx, dout), ctx.inputs[0]),)


def _local_to_global_grad(ctx, dout):
    a = ctx.attrs
    if M in (a["sbp"] if isinstance(a["sbp"][0], tuple) else (a["sbp"],)):
        raise OpError("local_to_global: the gradient of to_global(sbp=partial_max) of local "
                      "tensors is not built (make the tensor global first, then box it)")
    if isinstance(a["sbp"][0], tuple):  # n-d: per axis as below
        back = tuple(P if s == B else (B if s == P else s) for s in a["sbp"])
        return F.to_local(F.to_global(dout, sbp=tuple(SbpParallel.from_attr(s) for s in back)))
    sbp = SbpParallel.from_attr(a["sbp"])
    if sbp.is_broadcast:
        # the values came from the first rank: it gets the gradient, the others zeros
        return F.to_local(F.to_global(dout, sbp=SbpParallel.from_attr(P)))
    if sbp.is_partial_sum:
        return F.to_local(F.to_global(dout, sbp=SbpParallel.from_attr(B)))
    return F.to_local(F.to_global(dout, sbp=sbp))


def _as_input(grad, x):
    # a rank outside the placement gets an empty shard of the logical rank (OneFlow's shape);
    # the empty local tensor it gave to_global may have another shape
    if grad.numel() == 0 and x.numel() == 0 and tuple(grad._shape) != tuple(x._shape):
        return F.reshape(grad, tuple(x._shape))
    return grad


boxing_nd = register(
    "boxing_nd", doc="A change of n-d SBP on one placement, one hierarchy axis at a time with "
                     "the 1-D boxing ops, or no change (to_global(copy=True) or grad_sbp=...): "
                     "recorded by Tensor.to_global for autograd, never dispatched. Attrs: "
                     "in_sbp, the n-d SBP its gradient is boxed to; grad_mode "
                     "\"identity\" passes the gradient on unboxed.")
boxing_nd.infer(_not_dispatched("boxing_nd", "Tensor.to_global(sbp=...)"))


@boxing_nd.grad
def _(ctx, dout):
    back = tuple(SbpParallel.from_attr(s) for s in ctx.attrs["in_sbp"])
    return (_grad_of_boxing(ctx, dout, back),)


# ---- SBP-rule helpers for the op families -----------------------------------------------------

def elementwise_rule(inputs, attrs):
    """Elementwise ops (broadcasting): every input and the output split along the same output
    dim (an input that is broadcast along it - size 1 or missing - stays broadcast), all
    broadcast, or, for one input, partial_sum through linear ops only (see ``linear_rule``)."""
    shapes = [tuple(t._shape) for t in inputs]
    nd = max(len(s) for s in shapes)
    for d in range(nd):
        ins = []
        for s in shapes:
            k = d - (nd - len(s))
            ins.append(B if k < 0 or s[k] == 1 else S(k))
        if any(x[0] == "S" for x in ins):
            yield Sig(tuple(ins), (S(d),))


def linear_rule(inputs, attrs):
    """Elementwise ops that are linear in every input (add, sub, neg, scalar mul, scalar div
    by a number): also partial_sum in and out, when all inputs have the output's shape."""
    yield from elementwise_rule(inputs, attrs)
    shape = tuple(inputs[0]._shape)
    if not attrs.get("reverse") and all(tuple(t._shape) == shape for t in inputs):
        yield Sig((P,) * len(inputs), (P,))


def split_dims(shape: tuple) -> range:
    """The dims a tensor of ``shape`` may be split along."""
    return range(len(shape))
