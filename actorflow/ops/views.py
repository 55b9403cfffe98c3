"""Strided views: diagonal (with its scatter, ``diagonal_backward``, also the kernel of
``diag`` of a vector) and as_strided (with its scatter-add ``as_strided_backward``).

``diagonal`` is a view in eager mode (a writable strided view of the input's memory);
``as_strided`` is one too when every storage element it reads is an element of the input
(else an error, as in the copying kernel the compiled runtime may run instead).
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, norm_axis
from actorflow.ops.boxing import P, S, Sig, shard_shape
from actorflow.ops.registry import Meta, fail, register


# ---- diagonal ------------------------------------------------------------------------------------

def diagonal_shape(op_name: str, shape: tuple, offset: int, dim1: int, dim2: int) -> tuple:
    """Shape of ``diagonal(x, offset, dim1, dim2)``: the other dims, then the diagonal."""
    if len(shape) < 2:
        fail(op_name, f"expects a tensor with at least 2 dims, got {len(shape)}", shape)
    d1, d2 = norm_axis(op_name, dim1, len(shape)), norm_axis(op_name, dim2, len(shape))
    if d1 == d2:
        fail(op_name, f"diagonal dimensions cannot be identical ({dim1}, {dim2})", shape)
    if offset >= 0:
        n = max(min(shape[d1], shape[d2] - offset), 0)
    else:
        n = max(min(shape[d1] + offset, shape[d2]), 0)
    rest = tuple(s for i, s in enumerate(shape) if i not in (d1, d2))
    return rest + (n,)


def _diagonal_view(x: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    """A writable strided view of the diagonal (np.diagonal's view is read-only)."""
    d1, d2 = norm_axis("diagonal", dim1, x.ndim), norm_axis("diagonal", dim2, x.ndim)
    shape = diagonal_shape("diagonal", x.shape, offset, d1, d2)
    rest = [i for i in range(x.ndim) if i not in (d1, d2)]
    strides = tuple(x.strides[i] for i in rest) + (x.strides[d1] + x.strides[d2],)
    if shape[-1] == 0:
        return np.empty(shape, x.dtype)
    start = [0] * x.ndim
    if offset >= 0:
        start[d2] = offset
    else:
        start[d1] = -offset
    base = x[tuple(slice(s, None) for s in start)]
    return np.lib.stride_tricks.as_strided(base, shape, strides, writeable=True)


diagonal = register("diagonal", doc="The diagonal of dims ``dim1``, ``dim2`` at ``offset``, "
                                    "moved to the last dim; a view in eager.")


@diagonal.infer
def _(inputs, attrs):
    x = inputs[0]
    return [Meta(diagonal_shape("diagonal", x._shape, attrs["offset"], attrs["dim1"],
                                attrs["dim2"]), x.dtype)]


@diagonal.view
def _(ins, attrs):
    return [_diagonal_view(ins[0], attrs["offset"], attrs["dim1"], attrs["dim2"])]


@diagonal.view_write
def _(base, view, attrs, idx):
    a = {"shape": tuple(base._shape), "offset": attrs["offset"], "dim1": attrs["dim1"],
         "dim2": attrs["dim2"]}
    # (ones that need no grad: the mask records no autograd history)
    mask = F.call("diagonal_backward", F.ones_like(view).detach(), **a) != 0
    return F.where(mask, F.call("diagonal_backward", view, **a), base)


@diagonal.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = _diagonal_view(ins[0], attrs["offset"], attrs["dim1"], attrs["dim2"])


def _kept_dims(op_name: str, nd: int, attrs: dict) -> list:
    """The dims of an ``nd``-d tensor that ``diagonal`` keeps (in its output's order)."""
    d1, d2 = norm_axis(op_name, attrs["dim1"], nd), norm_axis(op_name, attrs["dim2"], nd)
    return [i for i in range(nd) if i not in (d1, d2)]


@diagonal.sbp
def _(inputs, attrs):
    """Split on a dim other than dim1, dim2 (k-th of the kept dims: output dim k); partial
    sums stay partial (OneFlow's diagonal)."""
    nd = len(inputs[0]._shape)
    if nd >= 2:
        for k, d in enumerate(_kept_dims("diagonal", nd, attrs)):
            yield Sig((S(d),), (S(k),))
    yield Sig((P,), (P,))


@diagonal.grad
def _(ctx, dout):
    a = ctx.attrs
    return F.call("diagonal_backward", dout, shape=tuple(ctx.input_metas[0][0]),
                  offset=a["offset"], dim1=a["dim1"], dim2=a["dim2"])


diagonal_backward = register(
    "diagonal_backward",
    doc="Zeros of ``shape`` with the input written on the diagonal (offset, dim1, dim2): the "
        "gradient of ``diagonal`` and ``diag`` of a vector.")


@diagonal_backward.infer
def _(inputs, attrs):
    g = inputs[0]
    shape = tuple(attrs["shape"])
    want = diagonal_shape("diagonal_backward", shape, attrs["offset"], attrs["dim1"],
                          attrs["dim2"])
    if tuple(g._shape) != want:
        fail("diagonal_backward", f"the diagonal of {shape} has shape {want}", g._shape)
    return [Meta(shape, g.dtype)]


@diagonal_backward.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    out.fill(0)
    _diagonal_view(out, attrs["offset"], attrs["dim1"], attrs["dim2"])[...] = ins[0]


@diagonal_backward.sbp
def _(inputs, attrs):
    """The inverse of diagonal's rule: the gradient split on its k-th dim (not the diagonal)
    gives zeros with the diagonal split on the k-th kept dim; partial stays partial."""
    shape = tuple(attrs["shape"])
    if len(shape) >= 2:
        for k, d in enumerate(_kept_dims("diagonal_backward", len(shape), attrs)):
            yield Sig((S(k),), (S(d),), None,
                      lambda a, index, n, d=d: dict(a, shape=shard_shape(a["shape"], S(d), n,
                                                                         index)))
    yield Sig((P,), (P,))


@diagonal_backward.grad
def _(ctx, dout):
    a = ctx.attrs
    return F.diagonal(dout, a["offset"], a["dim1"], a["dim2"])


# ---- as_strided ----------------------------------------------------------------------------------

def strided_index(size, stride, offset: int) -> np.ndarray:
    """Storage offsets of every element of a (size, stride, offset) view, in C order."""
    idx = np.full(tuple(size), int(offset), dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return idx


def _check_as_strided(op_name, in_shape, attrs):
    size, stride = tuple(attrs["size"]), tuple(attrs["stride"])
    if len(size) != len(stride):
        fail(op_name, f"size {size} and stride {stride} must have the same length", in_shape)
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or attrs["storage_offset"] < 0:
        fail(op_name, f"size {size}, stride {stride} and storage_offset "
             f"{attrs['storage_offset']} must be non-negative", in_shape)


as_strided = register(
    "as_strided",
    doc="Elements of the input's storage at ``storage_offset + sum(i_k * stride[k])`` for "
        "every index i of ``size``. The input's own layout is the attrs ``in_stride`` and "
        "``in_offset`` (its storage, in elements); a result reading storage the input does not "
        "cover is an error.")


@as_strided.infer
def _(inputs, attrs):
    x = inputs[0]
    _check_as_strided("as_strided", x._shape, attrs)
    _storage_map(tuple(x._shape), attrs,
                 strided_index(tuple(attrs["size"]), tuple(attrs["stride"]),
                               attrs["storage_offset"]))  # every element read is one of x's
    return [Meta(tuple(attrs["size"]), x.dtype)]


def _storage_map(shape, attrs, need: np.ndarray):
    """(positions of the input's elements in a storage array, its length), checking that
    every storage offset in ``need`` is covered by the input."""
    src = strided_index(shape, attrs["in_stride"], attrs["in_offset"])
    length = int(max(src.max(initial=-1), need.max(initial=-1))) + 1
    covered = np.zeros(length, dtype=bool)
    covered[src.ravel()] = True
    if need.size and not covered[need.ravel()].all():
        fail("as_strided", f"size {tuple(attrs['size'])}, stride {tuple(attrs['stride'])} and "
             f"offset {attrs['storage_offset']} read storage outside the input", shape)
    return src, length


def _as_strided_view(a: np.ndarray, attrs) -> np.ndarray:
    """A strided view of ``a`` (whose strides must be ``attrs['in_stride']`` elements, the
    layout the attrs describe) reading what ``as_strided`` reads."""
    size, stride = tuple(attrs["size"]), tuple(attrs["stride"])
    if tuple(s // a.itemsize for s in a.strides) != tuple(attrs["in_stride"]) and a.size > 1:
        raise ValueError("as_strided: the array's layout is not the recorded one")
    if 0 in size:
        return np.empty(size, a.dtype)
    idx = strided_index(size, stride, attrs["storage_offset"])
    src, _ = _storage_map(a.shape, attrs, idx)
    first = np.argwhere(src == attrs["storage_offset"])[0]  # covered: it is one of a's elements
    start = a[tuple(slice(int(i), None) for i in first)]
    return np.lib.stride_tricks.as_strided(start, size, tuple(s * a.itemsize for s in stride),
                                           writeable=a.flags.writeable)


@as_strided.view
def _(ins, attrs):
    return [_as_strided_view(ins[0], attrs)]


@as_strided.view_write
def _(base, view, attrs, idx):
    pos = strided_index(tuple(attrs["size"]), tuple(attrs["stride"]), attrs["storage_offset"])
    if np.unique(pos).size != pos.size:
        fail("as_strided", f"a write through a view whose elements overlap (size "
             f"{tuple(attrs['size'])}, stride {tuple(attrs['stride'])}) inside nn.Graph",
             base._shape)
    a = {k: attrs[k] for k in ("size", "stride", "storage_offset", "in_stride", "in_offset")}
    a["shape"] = tuple(base._shape)
    mask = F.call("as_strided_backward", F.ones_like(view).detach(), **a) != 0
    return F.where(mask, F.call("as_strided_backward", view, **a), base)


@as_strided.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    idx = strided_index(out.shape, attrs["stride"], attrs["storage_offset"])
    src, length = _storage_map(x.shape, attrs, idx)
    storage = np.zeros(length, dtype=x.dtype)
    storage[src.ravel()] = x.ravel()
    out[...] = storage[idx]


@as_strided.grad
def _(ctx, dout):
    return F.call("as_strided_backward", dout, shape=tuple(ctx.input_metas[0][0]),
                  **{k: ctx.attrs[k] for k in ("size", "stride", "storage_offset",
                                               "in_stride", "in_offset")})


as_strided_backward = register(
    "as_strided_backward",
    doc="Gradient of ``as_strided``: sums each output gradient into its storage position, "
        "read back in the input's layout.")


@as_strided_backward.infer
def _(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), inputs[0].dtype)]


@as_strided_backward.kernel("cpu")
def _(ins, outs, attrs):
    g, out = ins[0], outs[0]
    idx = strided_index(g.shape, attrs["stride"], attrs["storage_offset"])
    src, length = _storage_map(out.shape, attrs, idx)
    storage = np.zeros(length, dtype=out.dtype)
    np.add.at(storage, idx.ravel(), g.ravel())
    out[...] = storage[src]
