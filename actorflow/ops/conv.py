"""Convolutions (1-d, 2-d, 3-d) by im2col and their gradient ops.

Attrs shared by every op here (``n`` spatial dims):
  * ``stride``, ``dilation``: n-tuples of positive ints,
  * ``padding``: n-tuple of ``(low, high)`` zero-padding pairs (``'same'`` may be asymmetric),
  * ``groups``: int.

The forward builds a strided window view of the padded input with
``np.lib.stride_tricks.sliding_window_view`` (no Python loop over pixels), copies it once into a
column matrix and multiplies it with the weight. The input gradient multiplies the other way and
scatters the columns back with a loop over kernel positions only (col2im); the weight gradient
is one matrix product per group. Both gradients are ops of their own (``conv2d_grad_input``,
``conv2d_grad_weight``...), with gradient rules, so double backward works.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from actorflow.ops._common import F
from actorflow.ops.boxing import B, P, S, Sig, shard_shape
from actorflow.ops.registry import Meta, fail, register


# ---- helpers shared with pooling --------------------------------------------------------------

def compute_array(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype NumPy computes well in: float16/bfloat16 go to float32."""
    if a.dtype.itemsize < 4 or a.dtype.kind not in "fc":
        return a.astype(np.float32)
    return a


def padded(x: np.ndarray, pads: tuple, value=0.0) -> np.ndarray:
    """``x`` with its trailing ``len(pads)`` dims padded by ``(low, high)`` pairs."""
    if not any(lo or hi for lo, hi in pads):
        return x
    lead = ((0, 0),) * (x.ndim - len(pads))
    return np.pad(x, lead + tuple(pads), constant_values=value)


def windows(xp: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple) -> np.ndarray:
    """A view ``(..., *out, *kernel)`` of the windows of padded ``xp`` (no copy)."""
    n = len(kernel)
    eff = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
    win = sliding_window_view(xp, eff, axis=tuple(range(xp.ndim - n, xp.ndim)))
    if any(s != 1 for s in stride) or any(d != 1 for d in dilation):
        lead = (slice(None),) * (xp.ndim - n)
        win = win[lead + tuple(slice(None, None, s) for s in stride)
                  + tuple(slice(None, None, d) for d in dilation)]
    return win


def out_size(length: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    """Number of window positions along one dim (floor mode)."""
    return (length + lo + hi - d * (k - 1) - 1) // s + 1


def kernel_slices(kidx: tuple, outs: tuple, stride: tuple, dilation: tuple) -> tuple:
    """Slices of the padded input that kernel position ``kidx`` touches for every output."""
    return tuple(slice(k * d, k * d + s * (o - 1) + 1, s)
                 for k, o, s, d in zip(kidx, outs, stride, dilation))


def scatter_windows(target: np.ndarray, part, kernel: tuple, outs: tuple, stride: tuple,
                    dilation: tuple) -> None:
    """Add ``part(kidx)`` (shape ``(..., *outs)``) into the trailing dims of ``target`` at the
    positions kernel offset ``kidx`` touches: the adjoint of ``windows`` (col2im). Loops over
    kernel positions only."""
    for kidx in np.ndindex(*kernel):
        target[(Ellipsis,) + kernel_slices(kidx, outs, stride, dilation)] += part(kidx)


def crop(xp: np.ndarray, pads: tuple) -> np.ndarray:
    """Remove ``(low, high)`` padding from the trailing dims."""
    lead = (slice(None),) * (xp.ndim - len(pads))
    return xp[lead + tuple(slice(lo, xp.shape[xp.ndim - len(pads) + i] - hi)
                           for i, (lo, hi) in enumerate(pads))]


# ---- the column matrix ------------------------------------------------------------------------
# Layout: columns are (groups, prod(kernel) * C/groups, N * L), rows ordered (kernel..., channel),
# so a gradient's kernel-position slices are contiguous, and one GEMM per group covers the batch.

def _columns(x: np.ndarray, kernel: tuple, attrs: dict) -> np.ndarray:
    """Columns ``(groups, prod(kernel) * C/groups, N * L)`` of input ``x``."""
    n, g = len(kernel), attrs["groups"]
    N, C = x.shape[:2]
    win = windows(padded(x, attrs["padding"]), kernel, attrs["stride"], attrs["dilation"])
    outs = win.shape[2:2 + n]
    win = win.reshape((N, g, C // g) + outs + tuple(kernel))
    perm = (1,) + tuple(range(3 + n, 3 + 2 * n)) + (2, 0) + tuple(range(3, 3 + n))
    return np.ascontiguousarray(win.transpose(perm)).reshape(g, -1, N * int(np.prod(outs)))


def _weight_matrix(w: np.ndarray, g: int) -> np.ndarray:
    """Weight (O, C/g, *kernel) as (g, O/g, prod(kernel) * C/g), matching the column rows."""
    n = w.ndim - 2
    w = w.reshape((g, w.shape[0] // g) + w.shape[1:])
    return w.transpose((0, 1) + tuple(range(3, 3 + n)) + (2,)).reshape(g, w.shape[1], -1)


def _dout_matrix(dout: np.ndarray, g: int) -> np.ndarray:
    """dout (N, O, *outs) as (g, O/g, N * L)."""
    N, O = dout.shape[:2]
    d = np.ascontiguousarray(dout.reshape(N, O, -1).transpose(1, 0, 2))
    return d.reshape(g, O // g, -1)


def _empty_case(out, *ins) -> bool:
    """An empty input or output (a batch of 0, a 0-wide dim): the output is zeros."""
    if out.size and all(a.size for a in ins):
        return False
    out[...] = 0
    return True


def _forward(x, w, b, out, attrs):
    if _empty_case(out, x, w):
        if b is not None and out.size:
            out[...] = b.reshape((-1,) + (1,) * (out.ndim - 2))
        return
    x, w = compute_array(x), compute_array(w)
    N, O = out.shape[:2]
    res = np.matmul(_weight_matrix(w, attrs["groups"]), _columns(x, w.shape[2:], attrs))
    res = res.reshape(O, N, -1).transpose(1, 0, 2)
    target = out.reshape(N, O, -1)
    if b is None:
        target[...] = res
    else:
        np.add(res, b.reshape(O, 1), out=target, casting="unsafe")


def _grad_input(dout, w, out, attrs):
    if _empty_case(out, dout, w):
        return
    dout, w = compute_array(dout), compute_array(w)
    g, pads = attrs["groups"], attrs["padding"]
    kernel = tuple(w.shape[2:])
    N, C = out.shape[:2]
    outs = tuple(dout.shape[2:])
    cols = np.matmul(_weight_matrix(w, g).transpose(0, 2, 1), _dout_matrix(dout, g))
    cols = cols.reshape((g,) + kernel + (C // g, N) + outs)
    pshape = tuple(s + lo + hi for s, (lo, hi) in zip(out.shape[2:], pads))
    acc = np.zeros((g, C // g, N) + pshape, cols.dtype)
    pre = (slice(None),)
    scatter_windows(acc, lambda k: cols[pre + k], kernel, outs, attrs["stride"],
                    attrs["dilation"])
    acc = crop(acc.reshape((C, N) + pshape), pads)
    out[...] = acc.swapaxes(0, 1)


def _grad_weight(x, dout, out, attrs):
    if _empty_case(out, x, dout):
        return
    x, dout = compute_array(x), compute_array(dout)
    g = attrs["groups"]
    kernel = tuple(out.shape[2:])
    O, Cg = out.shape[:2]
    n = len(kernel)
    res = np.matmul(_dout_matrix(dout, g), _columns(x, kernel, attrs).transpose(0, 2, 1))
    res = res.reshape((g, O // g) + kernel + (Cg,))
    res = res.transpose((0, 1, 2 + n) + tuple(range(2, 2 + n)))
    out[...] = res.reshape(out.shape)


# ---- shape inference --------------------------------------------------------------------------

def check_attrs(name: str, n: int, attrs: dict) -> None:
    """Validate stride/padding/dilation/groups attrs of an n-d convolution."""
    stride, dilation, pads = attrs["stride"], attrs["dilation"], attrs["padding"]
    if len(stride) != n or len(dilation) != n or len(pads) != n:
        raise ValueError(f"{name}: stride, padding and dilation need {n} values each, got "
                         f"stride={stride}, padding={pads}, dilation={dilation}")
    if any(s <= 0 for s in stride):
        raise ValueError(f"{name}: stride must be positive, got {stride}")
    if any(d <= 0 for d in dilation):
        raise ValueError(f"{name}: dilation must be positive, got {dilation}")
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ValueError(f"{name}: padding must be non-negative, got {pads}")
    if attrs["groups"] <= 0:
        raise ValueError(f"{name}: groups must be positive, got {attrs['groups']}")


def _check_float(name, *ts):
    d = ts[0].dtype
    if not d.is_floating_point:
        raise TypeError(f"{name}: expected floating point tensors, got {d}")
    for t in ts[1:]:
        if t.dtype is not d:
            raise TypeError(f"{name}: input and weight dtypes differ ({d} vs {t.dtype})")


def conv_out_shape(name: str, n: int, xs: tuple, ws: tuple, attrs: dict) -> tuple:
    """Output shape of an n-d convolution of input shape ``xs`` with weight shape ``ws``."""
    check_attrs(name, n, attrs)
    g = attrs["groups"]
    if len(xs) != n + 2:
        fail(name, f"expected a {n + 2}-d input (batch, channels, {n} spatial dims), got "
             f"{len(xs)} dims", xs, ws)
    if len(ws) != n + 2:
        fail(name, f"expected a {n + 2}-d weight (out_channels, in_channels/groups, {n} kernel "
             f"dims), got {len(ws)} dims", xs, ws)
    if ws[0] % g:
        fail(name, f"out_channels ({ws[0]}) must be divisible by groups ({g})", xs, ws)
    if xs[1] != ws[1] * g:
        fail(name, f"given groups={g} and a weight of shape {tuple(ws)}, expected an input "
             f"with {ws[1] * g} channels, but got {xs[1]} channels", xs, ws)
    outs = tuple(out_size(L, k, s, lo, hi, d) for L, k, s, (lo, hi), d in
                 zip(xs[2:], ws[2:], attrs["stride"], attrs["padding"], attrs["dilation"]))
    if any(o <= 0 for o in outs):
        fail(name, f"the (padded) input is smaller than the (dilated) kernel; output size "
             f"would be {outs}", xs, ws)
    return (xs[0], ws[0]) + outs


# ---- registration -----------------------------------------------------------------------------

def _register(n: int) -> None:
    name = f"conv{n}d"
    conv = register(name, add_to_output=True, bias_input=2, amp="allow",
                    doc=f"{n}-d convolution (cross-correlation): inputs input, weight and "
                        f"optionally bias.")
    gin = register(name + "_grad_input", amp="allow",
                   doc=f"Gradient of {name} with respect to its input (inputs dout, weight; "
                       f"attr input_shape).")
    gw = register(name + "_grad_weight", amp="allow",
                  doc=f"Gradient of {name} with respect to its weight (inputs input, dout; "
                      f"attr weight_shape).")

    @conv.infer
    def _(inputs, attrs):
        x, w = inputs[0], inputs[1]
        _check_float(name, *inputs)
        shape = conv_out_shape(name, n, x._shape, w._shape, attrs)
        if len(inputs) > 2 and tuple(inputs[2]._shape) != (w._shape[0],):
            fail(name, f"bias must have shape ({w._shape[0]},), got {tuple(inputs[2]._shape)}",
                 x._shape, w._shape)
        return [Meta(shape, x.dtype)]

    @conv.kernel("cpu")
    def _(ins, outs, attrs):
        _forward(ins[0], ins[1], ins[2] if len(ins) > 2 else None, outs[0], attrs)

    @conv.grad
    def _(ctx, dout):
        x, w = ctx.inputs[0], ctx.inputs[1]
        need = ctx.needs_input_grad
        a = ctx.attrs
        dx = F.conv_grad_input(dout, w, x._shape, a["stride"], a["padding"], a["dilation"],
                               a["groups"]) if need[0] else None
        dw = F.conv_grad_weight(x, dout, w._shape, a["stride"], a["padding"], a["dilation"],
                                a["groups"]) if need[1] else None
        if len(need) == 2:
            return dx, dw
        db = F.sum(dout, dim=(0,) + tuple(range(2, 2 + n))) if need[2] else None
        return dx, dw, db

    @gin.infer
    def _(inputs, attrs):
        dout, w = inputs
        _check_float(gin.name, dout, w)
        xs = tuple(attrs["input_shape"])
        expect = conv_out_shape(gin.name, n, xs, w._shape, attrs)
        if tuple(dout._shape) != expect:
            fail(gin.name, f"dout has shape {tuple(dout._shape)}, expected {expect}",
                 dout._shape, w._shape)
        return [Meta(xs, dout.dtype)]

    @gin.kernel("cpu")
    def _(ins, outs, attrs):
        _grad_input(ins[0], ins[1], outs[0], attrs)

    @gin.grad
    def _(ctx, ddx):
        # conv_grad_input is linear in dout and in weight
        dout, w = ctx.inputs
        a = ctx.attrs
        need = ctx.needs_input_grad
        g_dout = F.conv_nd(ddx, w, None, a["stride"], a["padding"], a["dilation"],
                           a["groups"]) if need[0] else None
        g_w = F.conv_grad_weight(ddx, dout, w._shape, a["stride"], a["padding"], a["dilation"],
                                 a["groups"]) if need[1] else None
        return g_dout, g_w

    @gw.infer
    def _(inputs, attrs):
        x, dout = inputs
        _check_float(gw.name, x, dout)
        ws = tuple(attrs["weight_shape"])
        expect = conv_out_shape(gw.name, n, x._shape, ws, attrs)
        if tuple(dout._shape) != expect:
            fail(gw.name, f"dout has shape {tuple(dout._shape)}, expected {expect}",
                 x._shape, dout._shape)
        return [Meta(ws, x.dtype)]

    @gw.kernel("cpu")
    def _(ins, outs, attrs):
        _grad_weight(ins[0], ins[1], outs[0], attrs)

    @gw.grad
    def _(ctx, ddw):
        x, dout = ctx.inputs
        a = ctx.attrs
        need = ctx.needs_input_grad
        g_x = F.conv_grad_input(dout, ddw, x._shape, a["stride"], a["padding"], a["dilation"],
                                a["groups"]) if need[0] else None
        g_dout = F.conv_nd(x, ddw, None, a["stride"], a["padding"], a["dilation"],
                           a["groups"]) if need[1] else None
        return g_x, g_dout


    @conv.sbp
    def _(inputs, attrs):
        """The batch split, weight and bias broadcast: the result split on the batch."""
        yield Sig((S(0),) + (B,) * (len(inputs) - 1), (S(0),))

    @gin.sbp
    def _(inputs, attrs):
        """dout split on the batch, weight broadcast: the input gradient split on the batch."""
        def local(attrs, index, n):
            return dict(attrs, input_shape=shard_shape(tuple(attrs["input_shape"]), S(0), n,
                                                       index))
        yield Sig((S(0), B), (S(0),), None, local)

    @gw.sbp
    def _(inputs, attrs):
        """input and dout split on the batch: each rank's weight gradient is a partial sum."""
        yield Sig((S(0), S(0)), (P,))


for _n in (1, 2, 3):
    _register(_n)
