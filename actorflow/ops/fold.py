"""Sliding blocks of images: ``im2col`` (``nn.Unfold``) and its adjoint ``col2im``
(``nn.Fold``). Each is the other's gradient.

Blocks are ``kernel_size`` windows of a zero-``padding``ed (N, C, H, W) input taken every
``stride`` with ``dilation``; a column holds one block, channel-major:
row ``c * kh * kw + i * kw + j`` is channel c at kernel offset (i, j), as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.boxing import S, Sig
from actorflow.ops.registry import Meta, fail, register

_GEOMETRY = ("kernel_size", "dilation", "padding", "stride")


def blocks(op_name: str, size: tuple, attrs: dict, shape: tuple) -> tuple:
    """Number of block positions (oh, ow) over an image of ``size`` (H, W)."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (tuple(attrs[k]) for k in _GEOMETRY)
    if min(kh, kw, dh, dw, sh, sw) <= 0 or min(ph, pw) < 0:
        fail(op_name, f"kernel_size, dilation and stride must be positive and padding "
             f"non-negative, got {', '.join(f'{k}={tuple(attrs[k])}' for k in _GEOMETRY)}",
             shape)
    oh = (size[0] + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (size[1] + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        fail(op_name, f"the image {tuple(size)} (padding {(ph, pw)}) is smaller than the "
             f"dilated kernel {(dh * (kh - 1) + 1, dw * (kw - 1) + 1)}", shape)
    return oh, ow


def _windows(attrs: dict, oh: int, ow: int):
    """(i, j, slice of rows, slice of columns) of the padded image for each kernel offset."""
    (kh, kw), (dh, dw), _, (sh, sw) = (tuple(attrs[k]) for k in _GEOMETRY)
    for i in range(kh):
        for j in range(kw):
            yield (i, j, slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
                   slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


im2col = register("im2col", doc="Blocks of an (N, C, H, W) image as columns "
                                "(N, C*kh*kw, L): ``nn.Unfold``.")


@im2col.infer
def _(inputs, attrs):
    x = inputs[0]
    if len(x._shape) != 4:
        fail("im2col", "expects a 4-D (N, C, H, W) input", x._shape)
    n, c, h, w = x._shape
    oh, ow = blocks("im2col", (h, w), attrs, x._shape)
    kh, kw = attrs["kernel_size"]
    return [Meta((n, c * kh * kw, oh * ow), x.dtype)]


@im2col.sbp
def _(inputs, attrs):
    """As OneFlow: split along the batch, or along the channels when they split evenly (the
    rows of a channel's blocks then stay on its rank)."""
    yield Sig((S(0),), (S(0),))
    if inputs[0]._shape[1] % len(inputs[0].placement.flat_ranks) == 0:
        yield Sig((S(1),), (S(1),))


@im2col.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    n, c, h, w = x.shape
    ph, pw = attrs["padding"]
    oh, ow = blocks("im2col", (h, w), attrs, x.shape)
    kh, kw = attrs["kernel_size"]
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    cols = out.reshape(n, c, kh, kw, oh, ow)
    for i, j, rows, columns in _windows(attrs, oh, ow):
        cols[:, :, i, j] = padded[:, :, rows, columns]


@im2col.grad
def _(ctx, dout):
    return F.call("col2im", dout, output_size=tuple(ctx.input_metas[0][0][2:]),
                  **{k: ctx.attrs[k] for k in _GEOMETRY})


col2im = register("col2im", doc="Sum columns (N, C*kh*kw, L) back into their blocks of an "
                                "(N, C, H, W) image of ``output_size``: ``nn.Fold``.")


@col2im.infer
def _(inputs, attrs):
    x = inputs[0]
    if len(x._shape) != 3:
        fail("col2im", "expects a 3-D (N, C*kh*kw, L) input", x._shape)
    n, ck, length = x._shape
    kh, kw = attrs["kernel_size"]
    oh, ow = blocks("col2im", tuple(attrs["output_size"]), attrs, x._shape)
    if ck % (kh * kw) or length != oh * ow:
        fail("col2im", f"expects C*{kh * kw} rows and {oh * ow} blocks for output_size "
             f"{tuple(attrs['output_size'])}", x._shape)
    return [Meta((n, ck // (kh * kw)) + tuple(attrs["output_size"]), x.dtype)]


@col2im.sbp
def _(inputs, attrs):
    """As OneFlow: split along the batch."""
    yield Sig((S(0),), (S(0),))


@col2im.kernel("cpu")
def _(ins, outs, attrs):
    cols, out = ins[0], outs[0]
    n, c, h, w = out.shape
    ph, pw = attrs["padding"]
    oh, ow = blocks("col2im", (h, w), attrs, cols.shape)
    kh, kw = attrs["kernel_size"]
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=out.dtype)
    blocks_ = cols.reshape(n, c, kh, kw, oh, ow)
    for i, j, rows, columns in _windows(attrs, oh, ow):
        padded[:, :, rows, columns] += blocks_[:, :, i, j]
    out[...] = padded[:, :, ph:ph + h, pw:pw + w]


@col2im.grad
def _(ctx, dout):
    return F.call("im2col", dout, **{k: ctx.attrs[k] for k in _GEOMETRY})
