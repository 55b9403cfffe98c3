"""Ops that move or mask values: flip, roll, tril/triu and pad (constant, reflect, replicate,
circular). Each result is a fresh copy (as in PyTorch)."""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, acc_dtype, norm_axis
from actorflow.ops.boxing import P, S, Sig, shard_shape
from actorflow.ops.reduce import reduce_axes
from actorflow.ops.registry import Meta, fail, register


def _same(inputs, attrs):
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


# ---- flip / roll ---------------------------------------------------------------------------------

flip = register("flip", doc="Reverse the order of entries along ``dims``.")


@flip.infer
def _(inputs, attrs):
    reduce_axes("flip", attrs["dims"], len(inputs[0]._shape))
    return _same(inputs, attrs)


@flip.sbp
def _(inputs, attrs):
    """As OneFlow: split along any dim that is not reversed."""
    nd = len(inputs[0]._shape)
    flipped = reduce_axes("flip", attrs["dims"], nd) if attrs["dims"] else ()
    for d in range(nd):
        if d not in flipped:
            yield Sig((S(d),), (S(d),))


@flip.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    if x.ndim == 0 or not attrs["dims"]:
        outs[0][...] = x
        return
    outs[0][...] = np.flip(x, reduce_axes("flip", attrs["dims"], x.ndim))


@flip.grad
def _(ctx, dout):
    return F.flip(dout, ctx.attrs["dims"])


roll = register("roll", doc="Rotate entries by ``shifts`` along ``dims`` (None: flattened).")


@roll.infer
def _(inputs, attrs):
    x = inputs[0]
    shifts, dims = attrs["shifts"], attrs.get("dims")
    if dims is None:
        if len(shifts) != 1:
            fail("roll", f"without dims, shifts must be a single int, got {tuple(shifts)}",
                 x._shape)
    else:
        if len(shifts) != len(dims):
            fail("roll", f"shifts {tuple(shifts)} and dims {tuple(dims)} must have the same "
                 "length", x._shape)
        for d in dims:
            norm_axis("roll", d, len(x._shape))
    return _same(inputs, attrs)


@roll.kernel("cpu")
def _(ins, outs, attrs):
    x = ins[0]
    dims = attrs.get("dims")
    if dims is None or x.ndim == 0:
        outs[0][...] = np.roll(x.reshape(-1), attrs["shifts"][0]).reshape(x.shape)
    else:
        outs[0][...] = np.roll(x, tuple(attrs["shifts"]),
                               axis=tuple(norm_axis("roll", d, x.ndim) for d in dims))


@roll.grad
def _(ctx, dout):
    return F.roll(dout, tuple(-s for s in ctx.attrs["shifts"]), ctx.attrs.get("dims"))


@roll.sbp
def _(inputs, attrs):
    """Split on a dim the roll leaves alone (none when it rolls the flattened tensor);
    partial sums stay partial (a permutation is linear)."""
    shape, dims = tuple(inputs[0]._shape), attrs.get("dims")
    if dims is not None:
        rolled = {norm_axis("roll", d, len(shape)) for d in dims}
        for d in range(len(shape)):
            if d not in rolled:
                yield Sig((S(d),), (S(d),))
    yield Sig((P,), (P,))


# ---- triangles -----------------------------------------------------------------------------------

def _triangle(name: str, fn):
    op = register(name, doc=f"``{name}`` of the last two dims, offset by ``diagonal``.")

    @op.infer
    def _(inputs, attrs):
        if len(inputs[0]._shape) < 2:
            fail(name, "input must have at least 2 dimensions", inputs[0]._shape)
        return _same(inputs, attrs)

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        outs[0][...] = fn(ins[0], attrs.get("diagonal", 0))

    @op.grad
    def _(ctx, dout):
        return getattr(F, name)(dout, ctx.attrs.get("diagonal", 0))

    @op.sbp
    def _(inputs, attrs):
        # split on a batch dim (every matrix whole on one rank); masking with zeros is linear
        for d in range(len(inputs[0]._shape) - 2):
            yield Sig((S(d),), (S(d),))
        yield Sig((P,), (P,))
    return op


tril = _triangle("tril", np.tril)
triu = _triangle("triu", np.triu)


# ---- pad -----------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad_pairs(op_name: str, shape: tuple, pad) -> list:
    """``[(dim, left, right), ...]`` from PyTorch's pad tuple (last dim first)."""
    if len(pad) % 2:
        fail(op_name, f"padding length must be even, got {len(pad)}: {tuple(pad)}", shape)
    if len(pad) // 2 > len(shape):
        fail(op_name, f"padding {tuple(pad)} covers {len(pad) // 2} dims but the input has "
             f"{len(shape)}", shape)
    return [(len(shape) - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]))
            for i in range(len(pad) // 2)]


def pad_index(mode: str, size: int, left: int, right: int) -> np.ndarray:
    """Source index along one dim for every output position of a non-constant pad."""
    j = np.arange(-left, size + right)
    if mode == "replicate":
        return np.clip(j, 0, size - 1)
    if mode == "circular":
        return j % size
    if size == 1:
        return np.zeros_like(j)
    period = 2 * (size - 1)
    m = j % period
    return np.where(m < size, m, period - m)


pad = register("pad", doc="Pad dims (last dim first) by constant / reflect / replicate / circular.")


@pad.infer
def _(inputs, attrs):
    x = inputs[0]
    shape = list(x._shape)
    mode = attrs.get("mode", "constant")
    if mode not in PAD_MODES:
        fail("pad", f"mode must be one of {PAD_MODES}, got {mode!r}", x._shape)
    pairs = pad_pairs("pad", x._shape, attrs["pad"])
    if mode != "constant" and len(pairs) > 3:
        fail("pad", f"{mode} padding supports at most the last 3 dims", x._shape)
    for d, left, right in pairs:
        size = x._shape[d]
        if mode != "constant":
            if left < 0 or right < 0:
                fail("pad", f"{mode} padding must be non-negative, got {tuple(attrs['pad'])}",
                     x._shape)
            limit = size - 1 if mode == "reflect" else size
            if size == 0 or (mode != "replicate" and max(left, right) > limit):
                fail("pad", f"{mode} padding ({left}, {right}) is too large for dim {d} of size "
                     f"{size}", x._shape)
        shape[d] = size + left + right
        if shape[d] < 0:
            fail("pad", f"padding ({left}, {right}) makes dim {d} negative", x._shape)
    return [Meta(tuple(shape), x.dtype)]


@pad.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    pairs = pad_pairs("pad", x.shape, attrs["pad"])
    mode = attrs.get("mode", "constant")
    if mode == "constant":
        value = attrs.get("value")
        out.fill(0 if value is None else value)
        src = [slice(None)] * x.ndim
        dst = [slice(None)] * x.ndim
        for d, left, right in pairs:
            lo, hi = max(-left, 0), x.shape[d] - max(-right, 0)
            src[d] = slice(lo, max(hi, lo))
            dst[d] = slice(max(left, 0), max(left, 0) + max(hi - lo, 0))
        out[tuple(dst)] = x[tuple(src)]
        return
    y = x
    for d, left, right in pairs:
        y = np.take(y, pad_index(mode, x.shape[d], left, right), axis=d)
    out[...] = y


def _unpadded_dims(shape: tuple, pad) -> list:
    """The dims of ``shape`` that a pad tuple leaves as they are (no padding on either side)."""
    padded = {d for d, left, right in pad_pairs("pad", shape, pad) if left or right}
    return [d for d in range(len(shape)) if d not in padded]


@pad.sbp
def _(inputs, attrs):
    """Split on a dim the pad leaves as it is (each shard padded alike)."""
    for d in _unpadded_dims(tuple(inputs[0]._shape), attrs["pad"]):
        yield Sig((S(d),), (S(d),))


@pad.grad
def _(ctx, dout):
    mode = ctx.attrs.get("mode", "constant")
    if mode == "constant":  # padding by -p crops what padding by p added
        return F.pad(dout, tuple(-p for p in ctx.attrs["pad"]))
    return F.call("pad_backward", dout, pad=tuple(ctx.attrs["pad"]), mode=mode,
                  shape=tuple(ctx.input_metas[0][0]))


pad_backward = register("pad_backward",
                        doc="Gradient of a reflect/replicate/circular pad: sums each padded "
                            "entry back into its source.")


@pad_backward.infer
def _(inputs, attrs):
    return [Meta(tuple(attrs["shape"]), inputs[0].dtype)]


@pad_backward.kernel("cpu")
def _(ins, outs, attrs):
    g, out = ins[0], outs[0]
    shape = tuple(attrs["shape"])
    for d, left, right in pad_pairs("pad_backward", shape, attrs["pad"]):
        acc = np.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], dtype=acc_dtype(out.dtype))
        index = (slice(None),) * d + (pad_index(attrs["mode"], shape[d], left, right),)
        np.add.at(acc, index, g.astype(acc.dtype, copy=False))  # half: in float32
        g = acc
    np.copyto(out, g, casting="unsafe")


@pad_backward.sbp
def _(inputs, attrs):
    """Split on a dim the pad left as it is, the shard's own shape in ``shape``; partial sums
    stay partial (the sum back into the sources is linear)."""
    shape = tuple(attrs["shape"])
    for d in _unpadded_dims(shape, attrs["pad"]):
        def local(attrs, index, n, d=d):
            return dict(attrs, shape=shard_shape(shape, S(d), n, index))
        yield Sig((S(d),), (S(d),), None, local)
    yield Sig((P,), (P,))


@pad_backward.grad
def _(ctx, dout):
    return F.pad(dout, tuple(ctx.attrs["pad"]), mode=ctx.attrs["mode"])
