"""Sorting and selection: sort, topk, kthvalue, median (and nanmedian), mode, searchsorted,
unique, bincount and roc_auc_score.

Sorting is stable in both directions, as PyTorch's CPU sort: tied elements keep their order
(NaN sorts as the largest value). Ops that pick one element per row (``median_dim``,
``kthvalue``, ``mode``) return its int64 index, and their gradient goes to that index (the
``reduce_index_mask`` op of ``reduce_extrema``); the full ``median`` shares its gradient among
the elements equal to the result, as ``amax`` does. ``unique`` and ``bincount`` have output
shapes that depend on the input's values: like ``nonzero`` they read the input at inference,
so they run eagerly but cannot be traced into a Graph.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, norm_axis
from actorflow.framework.sbp_parallel import broadcast
from actorflow.ops.boxing import S, Sig
from actorflow.ops.reduce import along_dim_rule, broadcast_back, kept, reduced_shape
from actorflow.ops.reduce_extrema import selected_values_grad
from actorflow.ops.registry import Meta, fail, register


def sort_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sorting indices of ``x`` along ``axis``; descending keeps tied elements in their
    original order too (sorting the reversed array and reversing the result)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(idx, axis)


def _dim(name: str, x, attrs) -> int:
    """The normalised ``dim`` attr for an input of metadata ``x`` (a 0-d input takes 0/-1)."""
    return norm_axis(name, attrs["dim"], len(x._shape))


def _scatter_back(ctx, dvalues, indices):
    """The gradient of values picked at ``indices`` along ``dim``: ``dvalues`` put back there."""
    shape, d = ctx.input_metas[0]
    where = {}
    if dvalues.is_global:  # zeros laid out as dvalues (partial sums: broadcast zeros)
        where = {"placement": dvalues.placement,
                 "sbp": tuple(broadcast if s.is_partial_sum else s for s in dvalues.sbp)}
    zeros = F.zeros(tuple(shape), dtype=dvalues.dtype, **where)
    return F.scatter_add(zeros, ctx.attrs["dim"], indices, dvalues)


# ---- sort / topk ------------------------------------------------------------------------------

sort = register("sort", grad_uses_outputs=(1,),
                doc="Values and int64 indices of ``x`` sorted along ``dim`` (stable; "
                    "``descending``).")


@sort.infer
def _(inputs, attrs):
    x = inputs[0]
    _dim("sort", x, attrs)
    return [Meta(x._shape, x.dtype), Meta(x._shape, dt.int64)]


def _sorted_into(name: str, x, values, indices, dim: int, descending: bool, k=None) -> None:
    """Write the values of ``x`` sorted along ``dim`` (the first ``k`` of them, when given)
    and their indices into ``values`` and ``indices`` (sort and topk)."""
    if x.ndim == 0:
        values[...] = x
        indices[...] = 0
        return
    d = norm_axis(name, dim, x.ndim)
    idx = sort_order(x, d, descending)
    if k is not None:
        idx = np.take(idx, np.arange(k), axis=d)
    values[...] = np.take_along_axis(x, idx, axis=d)
    indices[...] = idx


@sort.kernel("cpu")
def _(ins, outs, attrs):
    _sorted_into("sort", ins[0], outs[0], outs[1], attrs["dim"],
                 attrs.get("descending", False))


@sort.grad
def _(ctx, dvalues, dindices):
    return _scatter_back(ctx, dvalues, ctx.outputs[1])


def _along_dim_sbp(name: str):
    """sort/topk: split on a dim other than the one sorted along (values and indices alike)."""
    def rule(inputs, attrs):
        shape = tuple(inputs[0]._shape)
        if not shape:
            return
        d0 = norm_axis(name, attrs["dim"], len(shape))
        for d in range(len(shape)):
            if d != d0:
                yield Sig((S(d),), (S(d), S(d)))
    return rule


sort.sbp(_along_dim_sbp("sort"))


topk = register("topk", grad_uses_outputs=(1,),
                doc="The ``k`` largest (``largest=False``: smallest) values along ``dim`` and "
                    "their int64 indices, in sorted order.")


@topk.infer
def _(inputs, attrs):
    x = inputs[0]
    d = _dim("topk", x, attrs)
    n = x._shape[d] if x._shape else 1
    k = attrs["k"]
    if not 0 <= k <= n:
        fail("topk", f"k ({k}) is out of range for dim {attrs['dim']} of size {n}", x._shape)
    shape = tuple(k if i == d else s for i, s in enumerate(x._shape))
    return [Meta(shape, x.dtype), Meta(shape, dt.int64)]


@topk.kernel("cpu")
def _(ins, outs, attrs):
    _sorted_into("topk", ins[0], outs[0], outs[1], attrs["dim"], attrs.get("largest", True),
                 attrs["k"])


@topk.grad
def _(ctx, dvalues, dindices):
    return _scatter_back(ctx, dvalues, ctx.outputs[1])


topk.sbp(_along_dim_sbp("topk"))


# ---- one element per row: kthvalue, median, mode ------------------------------------------------

def _rows(x: np.ndarray, d: int) -> np.ndarray:
    """``x`` with ``dim`` moved last and the other dims flattened: shape (rows, n)."""
    return np.moveaxis(x, d, -1).reshape(-1, x.shape[d])


def _put_rows(out: np.ndarray, rows: np.ndarray, x_shape: tuple, d: int) -> None:
    """Write per-row results (in ``_rows`` order) into an output of kept or dropped dim."""
    kept_shape = tuple(s for i, s in enumerate(x_shape) if i != d)
    out[...] = rows.reshape(kept_shape).reshape(out.shape)


def _pick_rows(x: np.ndarray, d: int, pick, values, indices) -> None:
    """Run ``pick(rows) -> (values, indices)`` over the rows along ``d`` into the outputs."""
    if x.ndim == 0:
        v, i = pick(x.reshape(1, 1))
        values[...] = v[0]
        indices[...] = i[0]
        return
    v, i = pick(_rows(x, d))
    _put_rows(values, v, x.shape, d)
    _put_rows(indices, i, x.shape, d)


def _kth_rows(rows: np.ndarray, k) -> tuple:
    """Values and indices at sorted position ``k`` (an int or one per row) of each row."""
    order = np.argsort(rows, axis=1, kind="stable")
    k = np.broadcast_to(np.asarray(k, dtype=np.int64), (rows.shape[0],))[:, None]
    idx = np.take_along_axis(order, k, axis=1)[:, 0]
    return rows[np.arange(rows.shape[0]), idx], idx


def _median_rows(rows: np.ndarray, ignore_nan: bool) -> tuple:
    """The lower median of each row with its index. ``median`` propagates NaN (the index of
    the first NaN); ``nanmedian`` skips NaNs (an all-NaN row gives NaN at index 0)."""
    n = rows.shape[1]
    if rows.dtype.kind not in "fc":
        return _kth_rows(rows, (n - 1) // 2)
    nan = np.isnan(rows)
    if ignore_nan:
        m = n - nan.sum(axis=1)
        values, idx = _kth_rows(rows, np.maximum((m - 1) // 2, 0))
        empty = m == 0
        values[empty] = np.nan
        idx[empty] = 0
        return values, idx
    values, idx = _kth_rows(rows, (n - 1) // 2)
    has = nan.any(axis=1)
    if has.any():
        values[has] = np.nan
        idx[has] = np.argmax(nan[has], axis=1)
    return values, idx


def _mode_rows(rows: np.ndarray) -> tuple:
    """The most frequent value of each row (the smallest on equal counts) and the index of its
    last occurrence, as PyTorch's CPU mode."""
    r, n = rows.shape
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, axis=1)
    new_run = np.ones((r, n), dtype=bool)
    new_run[:, 1:] = s[:, 1:] != s[:, :-1]
    end = np.ones((r, n), dtype=bool)
    end[:, :-1] = new_run[:, 1:]
    pos = np.arange(n)
    start = np.maximum.accumulate(np.where(new_run, pos, 0), axis=1)
    length = np.where(end, pos - start + 1, 0)
    best = np.argmax(length, axis=1)  # the first longest run: the smallest value
    ar = np.arange(r)
    return s[ar, best], order[ar, best]


def _select_op(name: str, doc: str, pick):
    """An op returning (values, int64 indices) of one element per row along ``dim``."""
    op = register(name, grad_uses_outputs=(1,), doc=doc)

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        d = _dim(name, x, attrs)
        axes = (d,) if x._shape else ()
        if x._shape and x._shape[d] == 0:
            fail(name, f"cannot select along dim {attrs['dim']} of size 0", x._shape)
        if name == "kthvalue":
            n = x._shape[d] if x._shape else 1
            if not 1 <= attrs["k"] <= n:
                fail(name, f"k ({attrs['k']}) is out of range for dim {attrs['dim']} of size "
                     f"{n}", x._shape)
        shape = reduced_shape(x._shape, axes, attrs.get("keepdim", False))
        return [Meta(shape, x.dtype), Meta(shape, dt.int64)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x = ins[0]
        d = norm_axis(name, attrs["dim"], x.ndim)
        _pick_rows(x, d, lambda rows: pick(rows, attrs), outs[0], outs[1])

    op.grad(selected_values_grad)
    op.sbp(along_dim_rule(name, 2, picks=True))
    return op


kthvalue = _select_op("kthvalue", "The k-th smallest value along ``dim`` (k from 1) and its "
                                  "int64 index.", lambda rows, a: _kth_rows(rows, a["k"] - 1))
median_dim = _select_op("median_dim", "Lower median along ``dim`` and its int64 index; "
                                      "``ignore_nan`` (nanmedian) skips NaNs.",
                        lambda rows, a: _median_rows(rows, a.get("ignore_nan", False)))
mode = _select_op("mode", "Most frequent value along ``dim`` (smallest on ties) and the index "
                          "of its last occurrence.", lambda rows, a: _mode_rows(rows))

median = register("median", grad_uses_outputs=True,
                  doc="Lower median of all elements (NaN for an empty input; ``ignore_nan``: "
                      "nanmedian); the gradient is shared among elements equal to it.")


@median.infer
def _(inputs, attrs):
    return [Meta((), inputs[0].dtype)]


@median.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    if x.size == 0:
        outs[0][...] = np.nan
        return
    v, _ = _median_rows(x.reshape(1, -1), attrs.get("ignore_nan", False))
    outs[0][...] = v[0]


@median.grad
def _(ctx, dout):
    weights = F.call("reduce_tie_weights", ctx.inputs[0], kept(ctx, ctx.outputs[0]), dim=None)
    return F.mul(broadcast_back(ctx, dout), weights)


# ---- searchsorted -----------------------------------------------------------------------------

searchsorted = register("searchsorted",
                        doc="Insertion indices of ``values`` into the innermost dim of "
                            "``sorted_sequence`` (inputs: seq, values[, sorter]); ``right`` "
                            "takes the last position among equal elements; ``out_int32``.")


@searchsorted.infer
def _(inputs, attrs):
    seq, values = inputs[0], inputs[1]
    ss, vs = tuple(seq._shape), tuple(values._shape)
    if not ss:
        fail("searchsorted", "sorted_sequence must have at least one dim", ss, vs)
    if len(ss) > 1 and (len(vs) != len(ss) or vs[:-1] != ss[:-1]):
        fail("searchsorted", "sorted_sequence and values must be 1-d, or have the same leading "
             "dims (all but the last)", ss, vs)
    if len(inputs) > 2:
        sorter = inputs[2]
        if tuple(sorter._shape) != ss or sorter.dtype._category != 1:
            fail("searchsorted", f"sorter must be an integer tensor of the sequence's shape, "
                 f"got {sorter.dtype}", ss, sorter._shape)
    return [Meta(vs, dt.int32 if attrs.get("out_int32") else dt.int64)]


@searchsorted.sbp
def _(inputs, attrs):
    """Split on a leading dim (the rows searched): sequence, values (and sorter) alike."""
    for d in range(len(inputs[0]._shape) - 1):
        yield Sig((S(d),) * len(inputs), (S(d),))


def binary_search(seq: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """Per row r, the first position i in ``seq[r]`` with ``seq[r, i] > v`` (``right``) or
    ``>= v`` for each ``v`` in ``values[r]``: the bisection PyTorch runs, vectorised, so an
    unsorted sequence gives PyTorch's answers too (NumPy's searchsorted may differ there)."""
    rows, n = seq.shape
    lo = np.zeros(values.shape, dtype=np.int64)
    hi = np.full(values.shape, n, dtype=np.int64)
    r = np.arange(rows)[:, None]
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        mid_val = seq[r, np.minimum(mid, n - 1)]
        go_right = ~(mid_val > values) if right else ~(mid_val >= values)
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)


@searchsorted.kernel("cpu")
def _(ins, outs, attrs):
    seq, values, out = ins[0], ins[1], outs[0]
    n = seq.shape[-1]
    seq2 = seq.reshape(-1, n)
    if len(ins) > 2:
        sorter = ins[2].reshape(-1, n)
        if sorter.size:
            lo, hi = int(sorter.min()), int(sorter.max())
            if lo < 0 or hi >= n:
                raise IndexError(f"searchsorted: sorter index {lo if lo < 0 else hi} is out of "
                                 f"range for a sequence of length {n}")
        seq2 = np.take_along_axis(seq2, sorter, axis=1)
    val2 = values.reshape(seq2.shape[0], -1)
    if n == 0:
        out[...] = 0
        return
    out[...] = binary_search(seq2, val2, bool(attrs.get("right"))).reshape(out.shape)


# ---- ops whose output shape depends on the values --------------------------------------------

def _eager_values(name: str, x) -> np.ndarray:
    if x.is_lazy:
        fail(name, "the output shape depends on the input's values, which a traced graph does "
             "not know", x._shape)
    return x._array()


def _unique(a: np.ndarray, keep_order: bool) -> tuple:
    """(values, inverse, counts) of the flattened ``a``; NaNs are each their own value (as in
    PyTorch). ``keep_order``: values in the order of their first occurrence."""
    flat = a.reshape(-1)
    values, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                               return_counts=True, equal_nan=False)
    if keep_order and values.size:
        perm = np.argsort(first, kind="stable")
        rank = np.empty_like(perm)
        rank[perm] = np.arange(perm.size)
        values, counts, inverse = values[perm], counts[perm], rank[inverse.reshape(-1)]
    return values, inverse.reshape(a.shape), counts


unique = register("unique", doc="The distinct elements (sorted, or in order of first "
                                "occurrence), the inverse indices (the input's shape) and the "
                                "counts; the output size depends on the values.")


@unique.infer
def _(inputs, attrs):
    x = inputs[0]
    n = _unique(_eager_values("unique", x), False)[0].size
    idt = attrs.get("dtype") or dt.int64
    return [Meta((n,), x.dtype), Meta(tuple(x._shape), idt), Meta((n,), idt)]


@unique.kernel("cpu")
def _(ins, outs, attrs):
    values, inverse, counts = _unique(ins[0], not attrs.get("sorted", True))
    outs[0][...] = values
    outs[1][...] = inverse
    outs[2][...] = counts


bincount = register("bincount", doc="Counts (or summed ``weights``) of each value of a 1-d "
                                    "non-negative integer tensor; length max(x) + 1 or "
                                    "``minlength``; the output size depends on the values.")


@bincount.infer
def _(inputs, attrs):
    x = inputs[0]
    if len(x._shape) != 1 or x.dtype._category != 1:
        fail("bincount", f"expected a 1-d integer tensor, got {x.dtype}", x._shape)
    weights = inputs[1] if len(inputs) > 1 else None
    if weights is not None and tuple(weights._shape) != tuple(x._shape):
        fail("bincount", "weights must have the input's shape", x._shape, weights._shape)
    minlength = attrs.get("minlength") or 0
    if minlength < 0:
        fail("bincount", f"minlength must be non-negative, got {minlength}")
    a = _eager_values("bincount", x)
    if a.size and int(a.min()) < 0:
        fail("bincount", f"the input must be non-negative, got {int(a.min())}", x._shape)
    n = max(int(a.max()) + 1 if a.size else 0, minlength)
    if weights is None:
        d = dt.int64
    else:
        d = weights.dtype if weights.dtype in (dt.float32, dt.float64) else dt.float64
    return [Meta((n,), d)]


@bincount.kernel("cpu")
def _(ins, outs, attrs):
    weights = ins[1].astype(np.float64) if len(ins) > 1 else None
    out = outs[0]
    out[...] = np.bincount(ins[0].astype(np.int64), weights, minlength=out.shape[0])


# ---- roc_auc_score ----------------------------------------------------------------------------

roc_auc_score = register("roc_auc_score", doc="Area under the ROC curve of scores ``pred`` for "
                                              "binary ``label`` (nonzero: positive), tied "
                                              "scores counted half; a float32 tensor of shape "
                                              "(1,).")


@roc_auc_score.infer
def _(inputs, attrs):
    label, pred = inputs
    if label.numel() != pred.numel():
        fail("roc_auc_score", "label and pred must have the same number of elements",
             label._shape, pred._shape)
    return [Meta((1,), dt.float32)]


@roc_auc_score.kernel("cpu")
def _(ins, outs, attrs):
    label = ins[0].reshape(-1) != 0
    pred = ins[1].reshape(-1).astype(np.float64)
    _, inverse, counts = np.unique(pred, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = (ends - (counts - 1) / 2.0)[inverse.reshape(-1)]  # average 1-based ranks of ties
    pos = int(label.sum())
    neg = label.size - pos
    with np.errstate(divide="ignore", invalid="ignore"):
        outs[0][0] = (ranks[label].sum() - pos * (pos + 1) / 2.0) / (pos * neg)
