"""``deform_conv2d``: deformable convolution (v1; v2 with a ``mask``), torchvision's and
OneFlow's semantics.

Kernel tap (i, j) of output position (ho, wo) reads the input at ``(ho * stride_h - pad_h +
i * dilation_h + dy, wo * stride_w - pad_w + j * dilation_w + dx)``, with (dy, dx) from
``offset`` (N, 2 * offset_groups * kh * kw, H_out, W_out: per group and tap, dy then dx),
by bilinear interpolation between the four surrounding pixels (pixels outside the image read
as zero), times ``mask`` (N, offset_groups * kh * kw, H_out, W_out) when given. The sampled
columns (N, C * kh * kw, H_out * W_out) are contracted with the weight per group by one batched
matmul, as im2col convolution.

A composite of registered ops: the four corners of every sample are one ``gather`` each from
the flattened input planes, weighted by the fractional parts of the positions; the gradient
w.r.t. the input comes from the gathers, w.r.t. the offsets from the bilinear weights, w.r.t.
mask and weight from the products.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.functional.activation import floor
from actorflow.functional.conv import ntuple
from actorflow.functional.creation import tensor
from actorflow.functional.index import gather
from actorflow.functional.linalg import matmul
from actorflow.functional.shape import reshape
from actorflow.tensor import Tensor

__all__ = ["deform_conv2d"]


def _shapes(input, offset, weight, bias, mask, stride, padding, dilation) -> tuple:
    """Validate the shapes; returns (groups, offset_groups, H_out, W_out)."""
    def bad(message):
        shapes = ", ".join(f"{name} {tuple(t._shape)}" for name, t in
                           (("input", input), ("offset", offset), ("weight", weight),
                            ("mask", mask), ("bias", bias)) if t is not None)
        raise ValueError(f"deform_conv2d: {message} ({shapes})")

    for name, t in (("input", input), ("offset", offset), ("weight", weight), ("mask", mask)):
        if t is not None and len(t._shape) != 4:
            bad(f"{name} must be 4-d")
    n, c, h, w = input._shape
    cout, cpg, kh, kw = weight._shape
    if cpg == 0 or c % cpg:
        bad("the input channels must be a multiple of weight.shape[1]")
    groups = c // cpg
    if cout % groups:
        bad(f"the output channels must be a multiple of the groups ({groups})")
    if offset._shape[1] % (2 * kh * kw) or offset._shape[1] == 0:
        bad(f"offset.shape[1] must be a positive multiple of 2 * kh * kw = {2 * kh * kw}")
    ogroups = offset._shape[1] // (2 * kh * kw)
    if c % ogroups:
        bad(f"the input channels must be a multiple of the offset groups ({ogroups})")
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hout = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wout = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    if hout <= 0 or wout <= 0:
        bad(f"the output would be empty ({hout} x {wout})")
    if tuple(offset._shape) != (n, 2 * ogroups * kh * kw, hout, wout):
        bad(f"offset must be (N, {2 * ogroups * kh * kw}, {hout}, {wout})")
    if mask is not None and tuple(mask._shape) != (n, ogroups * kh * kw, hout, wout):
        bad(f"mask must be (N, {ogroups * kh * kw}, {hout}, {wout})")
    if bias is not None and tuple(bias._shape) != (cout,):
        bad(f"bias must be ({cout},)")
    return groups, ogroups, hout, wout


def _base(kh, kw, hout, wout, stride, padding, dilation, d) -> tuple:
    """The undeformed sample positions, (1, 1, K, H_out, W_out) each for y and x."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    i, j = np.divmod(np.arange(kh * kw), kw)
    y = (i * dh - ph)[:, None, None] + (np.arange(hout) * sh)[None, :, None]
    x = (j * dw - pw)[:, None, None] + (np.arange(wout) * sw)[None, None, :]
    shape = (1, 1, kh * kw, hout, wout)
    return (tensor(np.broadcast_to(y, shape[2:]).reshape(shape).astype(d.np)),
            tensor(np.broadcast_to(x, shape[2:]).reshape(shape).astype(d.np)))


def deform_conv2d(input: Tensor, offset: Tensor, weight: Tensor, bias: Tensor | None = None,
                  stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                  mask: Tensor | None = None) -> Tensor:
    """Deformable 2-d convolution of ``input`` (N, C, H, W) with ``weight`` (C_out, C /
    groups, kh, kw), sampling at the positions ``offset`` moves each kernel tap to (see the
    module docstring); ``mask`` (deformable convolution v2) scales each sample."""
    stride = ntuple(stride, 2, "stride", "deform_conv2d")
    padding = ntuple(padding, 2, "padding", "deform_conv2d")
    dilation = ntuple(dilation, 2, "dilation", "deform_conv2d")
    groups, ogroups, hout, wout = _shapes(input, offset, weight, bias, mask, stride, padding,
                                          dilation)
    n, c, h, w = input._shape
    cout, cpg, kh, kw = weight._shape
    k, p = kh * kw, hout * wout
    d = input.dtype
    off = reshape(offset.to(d), (n, ogroups, k, 2, hout, wout))
    base_y, base_x = _base(kh, kw, hout, wout, stride, padding, dilation, d)
    y = off[:, :, :, 0] + base_y  # (N, G, K, H_out, W_out)
    x = off[:, :, :, 1] + base_x
    y0, x0 = floor(y), floor(x)
    ly, lx = y - y0, x - x0
    flat = reshape(input, (n, c, h * w))
    cg = c // ogroups
    cols = None
    for cy, cx, wgt in ((y0, x0, (1 - ly) * (1 - lx)), (y0, x0 + 1, (1 - ly) * lx),
                        (y0 + 1, x0, ly * (1 - lx)), (y0 + 1, x0 + 1, ly * lx)):
        inside = ((cy >= 0) & (cy <= h - 1) & (cx >= 0) & (cx <= w - 1)).to(d)
        index = (cy.clamp(0, h - 1) * w + cx.clamp(0, w - 1)).to(dt.int64)
        index = reshape(index, (n, ogroups, 1, k * p)).expand(n, ogroups, cg, k * p)
        values = reshape(gather(flat, 2, reshape(index, (n, c, k * p))),
                         (n, ogroups, cg, k * p))
        term = values * reshape(wgt * inside, (n, ogroups, 1, k * p))
        cols = term if cols is None else cols + term
    if mask is not None:
        cols = cols * reshape(mask.to(d), (n, ogroups, 1, k * p))
    # (N, C, K, P) -> per weight group (N, groups, C/groups * K, P)
    cols = reshape(cols, (n, groups, cpg * k, p))
    wmat = reshape(weight, (groups, cout // groups, cpg * k))
    out = reshape(matmul(wmat, cols), (n, cout, hout, wout))
    if bias is not None:
        out = out + reshape(bias, (1, cout, 1, 1))
    return out
