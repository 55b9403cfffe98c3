"""``scatter_nd`` (OneFlow's: a zero tensor of attr ``shape`` with ``updates`` added at the
n-d ``indices``) and ``in_top_k`` (whether each target class is among the ``k`` highest
predictions of its row)."""
from __future__ import annotations

import numpy as np

from actorflow.framework.dtype import bool_
from actorflow.ops._common import F, add_at
from actorflow.ops.boxing import B, P, S, Sig, shard_shape
from actorflow.ops.registry import Meta, OpError, fail, register

scatter_nd = register(
    "scatter_nd",
    doc="A zero tensor of attr shape with updates (input 1, shape indices.shape[:-1] + "
        "shape[k:]) added at indices (input 0, int, last dim k: the leading k coordinates); "
        "repeated indices accumulate.")


@scatter_nd.infer
def _(inputs, attrs):
    idx, upd = inputs
    shape = tuple(attrs["shape"])
    if not idx._shape or idx.dtype._category != 1:
        fail("scatter_nd", "indices must be an integer tensor of at least 1 dim", idx._shape)
    k = idx._shape[-1]
    if not 1 <= k <= len(shape):
        fail("scatter_nd", f"the last dim of indices ({k}) must be between 1 and the number of "
                           f"dims of shape {shape}", idx._shape)
    want = tuple(idx._shape[:-1]) + shape[k:]
    if tuple(upd._shape) != want:
        fail("scatter_nd", f"updates must have shape {want} for shape {shape}", idx._shape,
             upd._shape)
    return [Meta(shape, upd.dtype)]


@scatter_nd.kernel("cpu")
def _(ins, outs, attrs):
    idx, upd = ins
    out = outs[0]
    k = idx.shape[-1]
    flat = idx.reshape(-1, k).astype(np.int64)
    bounds = np.asarray(out.shape[:k])
    if ((flat < -bounds) | (flat >= bounds)).any():
        raise OpError(f"scatter_nd: an index is out of bounds for shape {out.shape} (indices "
                      f"shape {idx.shape})")
    out[...] = 0
    add_at(out, tuple(flat.T), upd.reshape((-1,) + out.shape[k:]))


@scatter_nd.grad
def _(ctx, dout):
    return None, F.gather_nd(dout, ctx.inputs[0])


@scatter_nd.sbp
def _(inputs, attrs):
    # the updates' trailing (slice) dims split the output's trailing dims alike
    idx, upd = inputs
    k = idx._shape[-1]
    lead = len(idx._shape) - 1
    for d in range(len(attrs["shape"]) - k):
        def local(attrs, index, n, d=d):
            return dict(attrs, shape=shard_shape(tuple(attrs["shape"]), S(k + d), n, index))
        yield Sig((B, S(lead + d)), (S(k + d),), None, local)
    yield Sig((B, P), (P,))
    if lead:  # each rank adds its share of the updates into zeros: partial sums
        yield Sig((S(0), S(0)), (P,))


in_top_k = register(
    "in_top_k",
    doc="Whether predictions[i, targets[i]] is among the k largest of row i (inputs targets "
        "(N,) int, predictions (N, C)): fewer than k predictions are strictly larger; False "
        "for an out-of-range target or a row with a non-finite value. Output (N,) bool.")


@in_top_k.infer
def _(inputs, attrs):
    targets, pred = inputs
    if len(pred._shape) != 2 or tuple(targets._shape) != tuple(pred._shape[:1]):
        fail("in_top_k", "expected targets (N,) and predictions (N, C)", targets._shape,
             pred._shape)
    if targets.dtype._category != 1:
        fail("in_top_k", f"targets must be integers, got {targets.dtype}", targets._shape)
    return [Meta(tuple(targets._shape), bool_)]


@in_top_k.kernel("cpu")
def _(ins, outs, attrs):
    targets, pred = ins[0].astype(np.int64), ins[1]
    n, c = pred.shape
    ok = (targets >= 0) & (targets < c)
    rows = np.arange(n)
    target_pred = pred[rows, np.where(ok, targets, 0)]
    larger = (pred > target_pred[:, None]).sum(axis=1)
    finite = np.isfinite(pred).all(axis=1) if c else np.ones(n, bool)
    outs[0][...] = ok & finite & (larger < attrs["k"])


@in_top_k.sbp
def _(inputs, attrs):
    yield Sig((S(0), S(0)), (S(0),))
