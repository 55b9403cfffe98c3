"""Extrema and norms: max/min along a dim (values + indices), amax/amin, argmax/argmin, norm.

Gradients: ``max_dim``/``min_dim`` send the gradient to the selected index (the first one on
ties, as NumPy and PyTorch pick it); ``amax``/``amin`` (and full ``max()``/``min()``) share it
evenly among tied elements, as PyTorch does. The masks they need are computed in the backward
pass by the helper ops ``reduce_index_mask`` and ``reduce_tie_weights``. On global tensors,
amax over a split dim gives partial maxima (``flow.sbp.partial_max``).
"""
from __future__ import annotations

import math

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, norm_axis
from actorflow.ops.boxing import M, S, Sig, elementwise_rule, shard_shape
from actorflow.ops.reduce import (
    ROW_MAX, along_dim_rule, broadcast_back, kept, kept_dims_rule, last_axis, np_axes,
    reduce_axes, reduced_shape, row_extremum,
)
from actorflow.ops.registry import CRow, Meta, fail, register


def _nonempty(name: str, shape: tuple, axes: tuple) -> None:
    if not shape:  # a 0-d tensor holds one element
        return
    for a in axes:
        if shape[a] == 0:
            fail(name, f"cannot reduce over dim {a} of size 0 (the operation has no identity)",
                 shape)


# ---- max / min along one dim: (values, indices) --------------------------------------------------

def selected_values_grad(ctx, dvalues, dindices):
    """The gradient of an op returning (values, indices) picked along ``attrs["dim"]`` (max/min
    over a dim, kthvalue, median, mode): each value's gradient goes to the element it came
    from."""
    shape = ctx.input_metas[0][0]
    idx = kept(ctx, ctx.outputs[1])
    mask = F.call("reduce_index_mask", idx, dim=ctx.attrs["dim"], shape=tuple(shape),
                  dtype=dvalues.dtype)
    return F.mul(broadcast_back(ctx, dvalues), mask)


def _dim_extremum(name: str, arg_fn):
    op = register(name, grad_uses_outputs=True,
                  doc="Values and int64 indices of the extremum along ``dim``.")

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        axes = (norm_axis(name, attrs["dim"], len(x._shape)),) if x._shape else ()
        _nonempty(name, x._shape, axes)
        shape = reduced_shape(x._shape, axes, attrs.get("keepdim", False))
        return [Meta(shape, x.dtype), Meta(shape, dt.int64)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x = ins[0]
        values, indices = outs
        if x.ndim == 0:
            values[...] = x
            indices[...] = 0
            return
        d = norm_axis(name, attrs["dim"], x.ndim)
        idx = arg_fn(x, axis=d, keepdims=True)
        values[...] = np.take_along_axis(x, idx, axis=d).reshape(values.shape)
        indices[...] = idx.reshape(indices.shape)

    op.grad(selected_values_grad)
    op.sbp(along_dim_rule(name, 2, picks=True))
    return op


max_dim = _dim_extremum("max_dim", np.argmax)
min_dim = _dim_extremum("min_dim", np.argmin)

reduce_index_mask = register("reduce_index_mask",
                             doc="1 at ``indices`` along ``dim`` (indices kept as size-1 dim), "
                                 "0 elsewhere: routes a max_dim/min_dim gradient.")


@reduce_index_mask.infer
def _(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), attrs["dtype"])]


@reduce_index_mask.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    if out.ndim == 0:
        out[...] = 1
        return
    out.fill(0)
    np.put_along_axis(out, ins[0], 1, axis=norm_axis("max", attrs["dim"], out.ndim))


@reduce_index_mask.sbp
def _(inputs, attrs):
    """The kept indices split on a dim other than ``dim``: the mask split there (the shard's
    shape as the target)."""
    nd = len(attrs["shape"])
    if nd:
        dim = norm_axis("max", attrs["dim"], nd)
        for d in range(nd):
            if d != dim:
                yield Sig((S(d),), (S(d),), None, lambda a, index, n, d=d: dict(
                    a, shape=shard_shape(a["shape"], S(d), n, index)))


# ---- amax / amin over several dims ---------------------------------------------------------------

def _extremum(name: str, fn):
    op = register(name, grad_uses_outputs=True,
                  doc="Largest/smallest value over ``dim`` (None: all); ties share the gradient.")

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        axes = reduce_axes(name, attrs.get("dim"), len(x._shape))
        _nonempty(name, x._shape, axes)
        return [Meta(reduced_shape(x._shape, axes, attrs.get("keepdim", False)), x.dtype)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x = ins[0]
        fn(x, axis=np_axes(x, name, attrs.get("dim")), out=outs[0],
           keepdims=attrs.get("keepdim", False))

    @op.sbp
    def _(inputs, attrs):
        # other split dims keep the split; amax over a split dim gives partial maxima (when
        # no shard is empty along it), and partial maxima stay partial
        x = inputs[0]
        shape, n = tuple(x._shape), len(x.placement.flat_ranks)
        axes = reduce_axes(name, attrs.get("dim"), len(shape))
        keep = attrs.get("keepdim", False)
        for d in range(len(shape)):
            if d not in axes:
                yield Sig((S(d),), (S(d if keep else d - sum(1 for a in axes if a < d)),))
            elif name == "amax" and shape[d] >= n:
                yield Sig((S(d),), (M,))
        if name == "amax":
            yield Sig((M,), (M,))

    @op.grad
    def _(ctx, dout):
        weights = F.call("reduce_tie_weights", ctx.inputs[0], kept(ctx, ctx.outputs[0]),
                         dim=ctx.attrs.get("dim"))
        return F.mul(broadcast_back(ctx, dout), weights)
    return op


amax = _extremum("amax", np.max)
amin = _extremum("amin", np.min)


# ---- how the extrema over the last axis compute one row in generated C (registry.py: c_row) --
# As NumPy: np.max / np.min propagate NaN; argmax / argmin take the first extremum, the first
# NaN if any. Comparisons only: the kernels' values and indices (of two equal zeros, +0 and -0,
# either may come out of amax / amin, as in NumPy's own loops; max / min with indices store
# the element they point at).
_ROW_MIN = row_extremum("<", "min")


def _extremum_row(body: str):
    def form(attrs, n_inputs):
        return CRow(body + "Y0(0, m);", ("row", "stat")) if last_axis(attrs, n_inputs) else None
    return form


def _arg_row(extremum: str):
    # the extremum (vectorised), then the first element equal to it (or the first NaN); the
    # value stored is that element's, so of equal zeros the first one's sign, as NumPy's take
    # (found by blocks of 16 compared at once, then within the block)
    body = extremum + """int64_t k = 0;
if (isn) { while (k < n - 1 && X0(k) == X0(k)) k++; }
else {
    for (; k + 16 <= n; k += 16) {
        int hit = 0;
        for (int64_t j = 0; j < 16; j++) hit |= X0(k + j) == m;
        if (hit) break;
    }
    while (k < n - 1 && X0(k) != m) k++;
}
Y0(0, X0(k));
Y1(0, k);"""

    def form(attrs, n_inputs):
        if n_inputs != 1 or attrs.get("dim") != -1:
            return None
        return CRow(body, ("row", "stat", "index"))
    return form


amax.c_row = _extremum_row(ROW_MAX)
amin.c_row = _extremum_row(_ROW_MIN)
max_dim.c_row = _arg_row(ROW_MAX)
min_dim.c_row = _arg_row(_ROW_MIN)

reduce_tie_weights = register("reduce_tie_weights",
                              doc="(x == y) / (number of ties) over ``dim``: how amax/amin "
                                  "share a gradient among equal extrema.")


@reduce_tie_weights.infer
def _(inputs, attrs):
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


@reduce_tie_weights.sbp
def _(inputs, attrs):
    """x and the extremum y (kept dims) split alike on a dim the reduction leaves (the ties
    along a reduced dim need all of it)."""
    axes = reduce_axes("amax", attrs.get("dim"), len(inputs[0]._shape))
    for d in range(len(inputs[0]._shape)):
        if d not in axes:
            yield Sig((S(d), S(d)), (S(d),))


def tie_weights(x: np.ndarray, y: np.ndarray, axes, out: np.ndarray) -> None:
    hit = (x == y) | (np.isnan(x) & np.isnan(y))
    ties = np.sum(hit, axis=axes, keepdims=True)
    np.divide(hit, np.maximum(ties, 1), out=out, dtype=out.dtype, casting="unsafe")


@reduce_tie_weights.kernel("cpu")
def _(ins, outs, attrs):
    x, y = ins
    tie_weights(x, y, np_axes(x, "amax", attrs.get("dim")), outs[0])


# ---- argmax / argmin -----------------------------------------------------------------------------

def _arg_extremum(name: str, fn):
    op = register(name, doc="int64 index of the extremum along ``dim`` (None: of the flattened "
                            "tensor).")

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        if x.dtype is dt.bool_:  # as PyTorch
            fail(name, "bool tensors are not supported (convert them to an integer or floating "
                       "dtype first)", x._shape)
        dim, keepdim = attrs.get("dim"), attrs.get("keepdim", False)
        if dim is None:
            if 0 in x._shape:
                fail(name, "cannot take the arg-extremum of an empty tensor", x._shape)
            return [Meta((1,) * len(x._shape) if keepdim else (), dt.int64)]
        axes = (norm_axis(name, dim, len(x._shape)),) if x._shape else ()
        _nonempty(name, x._shape, axes)
        return [Meta(reduced_shape(x._shape, axes, keepdim), dt.int64)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x, out = ins[0], outs[0]
        dim = attrs.get("dim")
        if dim is None or x.ndim == 0:
            out[...] = fn(x)
        else:
            out[...] = fn(x, axis=norm_axis(name, dim, x.ndim),
                          keepdims=attrs.get("keepdim", False))

    picks = along_dim_rule(name, 1, picks=True)

    @op.sbp
    def _(inputs, attrs):
        """Split on a dim other than ``dim`` (OneFlow's argmax: none on the reduced dim, whose
        index needs every rank's values; none for the flattened tensor)."""
        if attrs.get("dim") is not None:
            yield from picks(inputs, attrs)
    return op


argmax = _arg_extremum("argmax", np.argmax)
argmin = _arg_extremum("argmin", np.argmin)


# ---- norm ----------------------------------------------------------------------------------------

norm = register("norm", grad_uses_outputs=True, amp="deny",
                doc="Vector p-norm over ``dim`` (None: all): p = 2, 1, inf, -inf, 0 or any float.")


@norm.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x.dtype.is_floating_point:
        raise TypeError(f"norm: expected a floating point input, got {x.dtype}")
    axes = reduce_axes("norm", attrs.get("dim"), len(x._shape))
    return [Meta(reduced_shape(x._shape, axes, attrs.get("keepdim", False)), x.dtype)]


@norm.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    p = attrs["p"]
    axes = np_axes(x, "norm", attrs.get("dim"))
    keep = attrs.get("keepdim", False)
    acc = np.float64 if out.dtype == np.float64 else np.float32
    a = np.abs(x).astype(acc, copy=False)
    if p == 2:
        r = np.sqrt(np.sum(a * a, axis=axes, keepdims=keep))
    elif p == 1:
        r = np.sum(a, axis=axes, keepdims=keep)
    elif p == math.inf:
        r = np.max(a, axis=axes, keepdims=keep, initial=0)
    elif p == -math.inf:
        r = np.min(a, axis=axes, keepdims=keep, initial=math.inf)
    elif p == 0:
        r = np.sum(a != 0, axis=axes, keepdims=keep, dtype=acc)
    else:
        with np.errstate(divide="ignore"):
            r = np.sum(a ** p, axis=axes, keepdims=keep) ** (1.0 / p)
    out[...] = r


# p = 1 and p = 0 are sums (of |x|, of x != 0): a split reduced dim gives partial sums
norm.sbp(kept_dims_rule("norm", partial=lambda attrs: attrs["p"] in (0, 1)))


@norm.grad
def _(ctx, dout):
    factor = F.call("norm_grad_factor", ctx.inputs[0], kept(ctx, ctx.outputs[0]),
                    p=ctx.attrs["p"], dim=ctx.attrs.get("dim"))
    return F.mul(broadcast_back(ctx, dout), factor)


norm_grad_factor = register("norm_grad_factor",
                            doc="d norm_p(x) / dx given x and the norm y (kept dims); 0 where "
                                "the norm is 0, shared among ties for p = +-inf.", amp="deny")


@norm_grad_factor.infer
def _(inputs, attrs):
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


@norm_grad_factor.kernel("cpu")
def _(ins, outs, attrs):
    x, y = ins
    out = outs[0]
    p = attrs["p"]
    with np.errstate(divide="ignore", invalid="ignore"):
        if p == 0:
            out.fill(0)
        elif p == 1:
            np.sign(x, out=out)
        elif p == 2:
            out[...] = np.where(y == 0, 0, x / np.where(y == 0, 1, y))
        elif p in (math.inf, -math.inf):
            tie_weights(np.abs(x), y, np_axes(x, "norm", attrs.get("dim")), out)
            out *= np.sign(x)
        else:
            a = np.abs(x)
            val = np.sign(x) * (a / np.where(y == 0, 1, y)) ** (p - 1)
            out[...] = np.where((y == 0) | (a == 0), 0, val)


@norm_grad_factor.sbp
def _(inputs, attrs):
    """x and the norm y (kept dims) split alike on a dim the norm leaves; for a finite p the
    factor is elementwise in (x, y), so x may also be split on a reduced dim with y (of size
    1 there) broadcast. For p = +-inf the ties along the reduced dims need all of x."""
    if attrs["p"] in (math.inf, -math.inf):
        axes = reduce_axes("norm", attrs.get("dim"), len(inputs[0]._shape))
        for d in range(len(inputs[0]._shape)):
            if d not in axes:
                yield Sig((S(d), S(d)), (S(d),))
    else:
        yield from elementwise_rule(inputs, attrs)


@norm_grad_factor.grad
def _(ctx, dfactor):
    p = ctx.attrs["p"]
    if p in (0, 1, math.inf, -math.inf):  # piecewise constant in x
        return None, None
    if p != 2:
        raise NotImplementedError(f"norm: gradients of order two or more are supported for "
                                  f"p in (0, 1, 2, inf, -inf), not p={p}")
    x, y = ctx.inputs  # factor = x / y
    gx = F.div(dfactor, y)
    gy = F.neg(F.sum_to(F.div(F.mul(dfactor, x), F.mul(y, y)), ctx.input_metas[1][0]))
    return gx, gy
