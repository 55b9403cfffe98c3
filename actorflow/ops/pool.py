"""Pooling (1-d, 2-d, 3-d): max, average and adaptive average, with their gradient ops.

Attrs are n-tuples of ints (``kernel_size``, ``stride``, ``padding``, ``dilation``) plus flags.
Max pooling keeps a running maximum over the strided views of the kernel positions (a few
passes per position, no gathered window tensor); average pooling sums those views; gradients
scatter back with a loop over kernel positions (average) or through the argmax indices the
forward op returns as its second output (max: one ``np.bincount``, or a plain scatter when the
grad op's ``disjoint`` attr says the windows do not overlap).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework.dtype import int64
from actorflow.ops._common import F, is_floating
from actorflow.ops.conv import compute_array, crop, kernel_slices, padded, scatter_windows, \
    windows
from actorflow.ops.boxing import S, Sig, shard_shape
from actorflow.ops.registry import Meta, fail, register


def pool_out_size(length: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """Output length of a pooling window along one dim (PyTorch's rule, incl. ceil_mode)."""
    span = length + 2 * p - d * (k - 1) - 1
    o = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= length + p:
        o -= 1  # the last window must start inside the input or the left padding
    return o


def _pool_shape(name: str, n: int, xs: tuple, attrs: dict, dilation=None) -> tuple:
    k, s, p = attrs["kernel_size"], attrs["stride"], attrs["padding"]
    d = dilation or (1,) * n
    if len(xs) != n + 2:
        fail(name, f"expected a {n + 2}-d input (batch, channels, {n} spatial dims), got "
             f"{len(xs)} dims", xs)
    if not (len(k) == len(s) == len(p) == len(d) == n):
        raise ValueError(f"{name}: kernel_size, stride, padding and dilation need {n} values "
                         f"each, got {k}, {s}, {p}, {d}")
    if any(v <= 0 for v in k + s + d):
        raise ValueError(f"{name}: kernel_size, stride and dilation must be positive, got "
                         f"{k}, {s}, {d}")
    for ki, pi, di in zip(k, p, d):
        if pi < 0 or 2 * pi > di * (ki - 1) + 1:
            raise ValueError(f"{name}: padding should be non-negative and at most half of the "
                             f"(dilated) kernel size, got padding={p}, kernel_size={k}")
    outs = tuple(pool_out_size(L, ki, si, pi, di, attrs["ceil_mode"])
                 for L, ki, si, pi, di in zip(xs[2:], k, s, p, d))
    if any(o <= 0 for o in outs):
        fail(name, f"the output would be empty ({outs}); the input is too small for "
             f"kernel_size={k}", xs)
    return tuple(xs[:2]) + outs


def _pad_pairs(in_sizes, outs, attrs, dilation) -> tuple:
    """(low, high) padding so every output window fits (ceil_mode may need more on the right)."""
    pairs = []
    for L, o, k, s, p, d in zip(in_sizes, outs, attrs["kernel_size"], attrs["stride"],
                                attrs["padding"], dilation):
        need = (o - 1) * s + d * (k - 1) + 1
        pairs.append((p, max(p, need - L - p)))
    return tuple(pairs)


def _float_input(name, x):
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating point input, got {x.dtype}")


# ---- max pooling ------------------------------------------------------------------------------

def _max_forward(x, out, idx_out, attrs):
    n = len(attrs["kernel_size"])
    kernel, dil = attrs["kernel_size"], attrs["dilation"]
    in_sizes, outs = x.shape[2:], out.shape[2:]
    pads = _pad_pairs(in_sizes, outs, attrs, dil)
    floating = is_floating(x.dtype)
    fill = -np.inf if floating else np.iinfo(x.dtype).min
    xp = padded(x, pads, fill)
    k_count = int(np.prod(kernel))
    # NaN (the first one wins), inf, or an integer equal to the padding's fill; isfinite().all()
    # cannot overflow (a sum does: 3.0 summed over 22k float16 values is inf) and costs about a
    # sum in float32/float64 and half of one in float16 (NumPy, session 9)
    special = (not np.isfinite(x).all() if floating
               else xp is not x and x.size and x.min() == fill)
    if special or k_count > 255:
        _max_forward_argmax(xp, out, idx_out, attrs, pads)
        return
    # running maximum over the strided views of the kernel positions (no gathered windows); a
    # strictly greater value takes over, so ties keep the first position (np.argmax's rule), and
    # the position taken last is the largest k with v_k > max(v_0..v_k-1): k_out = max(k * mask)
    stride = attrs["stride"]
    best = out if out.dtype == x.dtype and out.flags.c_contiguous else np.empty(out.shape, x.dtype)
    k_out = np.zeros(out.shape, np.uint8)
    mask = np.empty(out.shape, bool)
    k_mask = np.empty(out.shape, np.uint8)
    for k, kidx in enumerate(np.ndindex(*kernel)):
        view = xp[(Ellipsis,) + kernel_slices(kidx, outs, stride, dil)]
        if k == 0:
            np.copyto(best, view)
            continue
        np.greater(view, best, out=mask)
        np.maximum(best, view, out=best)
        np.multiply(mask.view(np.uint8), np.uint8(k), out=k_out if k == 1 else k_mask)
        if k > 1:
            np.maximum(k_out, k_mask, out=k_out)
    if best is not out:
        out[...] = best
    # the input is finite (above the fill), so the maximum is never in the padding: the flat
    # input index is base(output position) + offset(kernel position), no clipping
    offset = np.zeros((), np.int64)
    base = np.zeros((), np.int64)
    for dim in range(n):
        offset = np.add.outer(offset * in_sizes[dim], np.arange(kernel[dim]) * dil[dim])
        start = np.arange(outs[dim]) * stride[dim] - pads[dim][0]
        base = np.add.outer(base * in_sizes[dim], start)
    index = idx_out if idx_out.flags.c_contiguous else np.empty(out.shape, np.int64)
    np.take(offset.reshape(-1), k_out, out=index)
    index += base
    if index is not idx_out:
        idx_out[...] = index


def _max_forward_argmax(xp, out, idx_out, attrs, pads):
    """Max pooling through the gathered windows and np.argmax (inputs with NaN or inf, over 255
    kernel positions, or integers equal to the padding's fill)."""
    n = len(attrs["kernel_size"])
    kernel, dil = attrs["kernel_size"], attrs["dilation"]
    outs = out.shape[2:]
    in_sizes = tuple(L - lo - hi for L, (lo, hi) in zip(xp.shape[2:], pads))
    win = windows(xp, kernel, attrs["stride"], dil)
    win = win[(Ellipsis,) + tuple(slice(0, o) for o in outs) + (slice(None),) * n]
    flat = win.reshape(win.shape[:2 + n] + (-1,))
    arg = np.argmax(flat, axis=-1)
    out[...] = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
    # flat index into the input's spatial dims: o * s - p + k * d per dim, clipped to the input
    kpos = np.unravel_index(arg, kernel)
    index = np.zeros(arg.shape, np.int64)
    for dim in range(n):
        shape = [1] * arg.ndim
        shape[2 + dim] = outs[dim]
        start = (np.arange(outs[dim]) * attrs["stride"][dim] - pads[dim][0]).reshape(shape)
        pos = np.clip(start + kpos[dim] * dil[dim], 0, in_sizes[dim] - 1)
        index = index * in_sizes[dim] + pos
    idx_out[...] = index


def _max_backward(dout, index, out, disjoint: bool = False):
    N, C = out.shape[:2]
    size = int(np.prod(out.shape[2:]))
    if disjoint and out.flags.c_contiguous and size:
        # windows that do not overlap have distinct argmax positions: assign, nothing to add
        out[...] = 0
        np.put_along_axis(out.reshape(N * C, size), index.reshape(N * C, -1),
                          dout.reshape(N * C, -1), axis=1)
        return
    flat = index.reshape(N * C, -1) + (np.arange(N * C, dtype=np.int64) * size)[:, None]
    res = np.bincount(flat.ravel(), weights=dout.reshape(-1), minlength=N * C * size)
    out[...] = res.reshape(out.shape)


# ---- average pooling --------------------------------------------------------------------------

def _avg_divisor(in_sizes, outs, attrs) -> np.ndarray:
    """Per-output divisor: the product of per-dim window lengths (PyTorch's rule)."""
    if attrs.get("divisor_override"):
        return np.array(float(attrs["divisor_override"]))
    div = np.ones((), np.float64)
    for L, o, k, s, p in zip(in_sizes, outs, attrs["kernel_size"], attrs["stride"],
                             attrs["padding"]):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, L + p)
        if not attrs["count_include_pad"]:
            start, end = np.maximum(start, 0), np.minimum(end, L)
        div = np.multiply.outer(div, (end - start).astype(np.float64))
    return div


def _avg_forward(x, out, attrs):
    x = compute_array(x)
    kernel, stride = attrs["kernel_size"], attrs["stride"]
    n = len(kernel)
    in_sizes, outs = x.shape[2:], out.shape[2:]
    pads = _pad_pairs(in_sizes, outs, attrs, (1,) * n)
    xp = padded(x, pads)
    acc = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    for kidx in np.ndindex(*kernel):
        acc += xp[(Ellipsis,) + kernel_slices(kidx, outs, stride, (1,) * n)]
    np.divide(acc, _avg_divisor(in_sizes, outs, attrs), out=out, casting="unsafe")


def _avg_backward(dout, out, attrs):
    dout = compute_array(dout)
    kernel, stride = attrs["kernel_size"], attrs["stride"]
    n = len(kernel)
    in_sizes, outs = out.shape[2:], dout.shape[2:]
    pads = _pad_pairs(in_sizes, outs, attrs, (1,) * n)
    g = dout / _avg_divisor(in_sizes, outs, attrs)
    acc = np.zeros(out.shape[:2] + tuple(L + lo + hi for L, (lo, hi) in zip(in_sizes, pads)),
                   g.dtype)
    scatter_windows(acc, lambda k: g, kernel, outs, stride, (1,) * n)
    out[...] = crop(acc, pads)


# ---- adaptive average pooling -----------------------------------------------------------------

def _adaptive_matrix(length: int, o: int, dtype) -> np.ndarray:
    """(o, length) matrix averaging the bins floor(i*L/o) .. ceil((i+1)*L/o)."""
    m = np.zeros((o, length), dtype)
    for i in range(o):
        start, end = (i * length) // o, -((-(i + 1) * length) // o)
        m[i, start:end] = 1.0 / (end - start)
    return m


def _adaptive_apply(x, out, in_sizes, out_sizes, transpose: bool):
    """Apply the per-dim averaging matrices (or their transposes) along each spatial dim."""
    x = compute_array(x)
    n = len(in_sizes)
    for dim in range(n):
        m = _adaptive_matrix(in_sizes[dim], out_sizes[dim], x.dtype)
        if transpose:
            m = m.T
        x = np.moveaxis(np.tensordot(x, m, axes=([2 + dim], [1])), -1, 2 + dim)
    out[...] = x


# ---- registration -----------------------------------------------------------------------------

def _zero_input_grad(ctx, arity: int) -> tuple:
    """A pooling gradient op may take the pooled input ``x`` as a trailing input the kernel
    does not read: the gradient then depends on ``x`` in the graph (with a zero derivative),
    as in PyTorch and OneFlow, so double backward can differentiate with respect to ``x``."""
    if len(ctx.input_metas) == arity:
        return ()
    shape, dtype = ctx.input_metas[-1]
    return (F.zeros(shape, dtype=dtype),)



def plane_rule(n_out: int, sized: bool = False):
    """The SBP rule of an op that works plane by plane (pooling and its gradients): every input
    and output split on the batch or the channel dim alike. ``sized``: the attr
    ``input_shape`` (of a gradient op) becomes the shard's."""
    def rule(inputs, attrs):
        for d in (0, 1):
            local = None
            if sized:
                def local(attrs, index, n, d=d):
                    return dict(attrs, input_shape=shard_shape(tuple(attrs["input_shape"]),
                                                               S(d), n, index))
            yield Sig((S(d),) * len(inputs), (S(d),) * n_out, None, local)
    return rule


def _register(n: int) -> None:
    mp = register(f"max_pool{n}d", grad_uses_outputs=True,
                  doc=f"{n}-d max pooling; outputs the values and the argmax (flat index into "
                      f"each input plane).")
    mpg = register(f"max_pool{n}d_grad", doc=f"Gradient of max_pool{n}d: scatter dout to the "
                                             f"argmax positions (inputs dout, indices[, x]; x, the "
                                             f"pooled input, is not read: see _zero_input_grad)"
                                             f".")
    ap = register(f"avg_pool{n}d", doc=f"{n}-d average pooling.")
    apg = register(f"avg_pool{n}d_grad", doc=f"Gradient of avg_pool{n}d (inputs dout[, x]).")
    aap = register(f"adaptive_avg_pool{n}d", doc=f"{n}-d adaptive average pooling.")
    aapg = register(f"adaptive_avg_pool{n}d_grad", doc=f"Gradient of adaptive_avg_pool{n}d "
                                                      f"(inputs dout[, x]).")

    @mp.infer
    def _(inputs, attrs):
        x = inputs[0]
        shape = _pool_shape(mp.name, n, x._shape, attrs, attrs["dilation"])
        return [Meta(shape, x.dtype), Meta(shape, int64)]

    @mp.kernel("cpu")
    def _(ins, outs, attrs):
        _max_forward(ins[0], outs[0], outs[1], attrs)

    @mp.grad
    def _(ctx, dout, _didx):
        k, s, d = (ctx.attrs[a] for a in ("kernel_size", "stride", "dilation"))
        disjoint = all(si >= di * (ki - 1) + 1 for ki, si, di in zip(k, s, d))
        return F.max_pool_grad(dout, ctx.outputs[1], ctx.input_metas[0][0], ctx.inputs[0],
                               disjoint)

    @mpg.infer
    def _(inputs, attrs):
        dout, idx = inputs[:2]
        if tuple(dout._shape) != tuple(idx._shape):
            fail(mpg.name, "dout and indices must have the same shape", dout._shape, idx._shape)
        return [Meta(tuple(attrs["input_shape"]), dout.dtype)]

    @mpg.kernel("cpu")
    def _(ins, outs, attrs):
        _max_backward(ins[0], ins[1], outs[0], attrs.get("disjoint", False))

    @mpg.grad
    def _(ctx, ddx):
        # the adjoint of scattering to the argmax positions is gathering from them
        dout, idx = ctx.inputs[:2]
        N, C = dout._shape[:2]
        flat = F.gather(F.reshape(ddx, (N, C, -1)), 2, F.reshape(idx, (N, C, -1)))
        return (F.reshape(flat, dout._shape), None) + _zero_input_grad(ctx, 2)

    @ap.infer
    def _(inputs, attrs):
        x = inputs[0]
        _float_input(ap.name, x)
        return [Meta(_pool_shape(ap.name, n, x._shape, attrs), x.dtype)]

    @ap.kernel("cpu")
    def _(ins, outs, attrs):
        _avg_forward(ins[0], outs[0], attrs)

    @ap.grad
    def _(ctx, dout):
        return F.avg_pool_grad(dout, ctx.input_metas[0][0], ctx.attrs, ctx.inputs[0])

    @apg.infer
    def _(inputs, attrs):
        dout = inputs[0]
        xs = tuple(attrs["input_shape"])
        expect = _pool_shape(apg.name, n, xs, attrs)
        if tuple(dout._shape) != expect:
            fail(apg.name, f"dout has shape {tuple(dout._shape)}, expected {expect}", xs)
        return [Meta(xs, dout.dtype)]

    @apg.kernel("cpu")
    def _(ins, outs, attrs):
        _avg_backward(ins[0], outs[0], attrs)

    @apg.grad
    def _(ctx, ddx):
        attrs = {k: v for k, v in ctx.attrs.items() if k != "input_shape"}
        return (F.avg_pool_nd(ddx, attrs),) + _zero_input_grad(ctx, 1)

    @aap.infer
    def _(inputs, attrs):
        x = inputs[0]
        _float_input(aap.name, x)
        if len(x._shape) != n + 2:
            fail(aap.name, f"expected a {n + 2}-d input (batch, channels, {n} spatial dims)",
                 x._shape)
        size = tuple(attrs["output_size"])
        if len(size) != n or any(s <= 0 for s in size):
            raise ValueError(f"{aap.name}: output_size needs {n} positive values, got {size}")
        if any(L == 0 for L in x._shape[2:]):
            fail(aap.name, "spatial dims must be non-empty", x._shape)
        return [Meta(tuple(x._shape[:2]) + size, x.dtype)]

    @aap.kernel("cpu")
    def _(ins, outs, attrs):
        _adaptive_apply(ins[0], outs[0], ins[0].shape[2:], attrs["output_size"], False)

    @aap.grad
    def _(ctx, dout):
        return F.adaptive_avg_pool_grad(dout, ctx.input_metas[0][0], ctx.inputs[0])

    @aapg.infer
    def _(inputs, attrs):
        dout = inputs[0]
        xs = tuple(attrs["input_shape"])
        if len(dout._shape) != n + 2 or len(xs) != n + 2 or dout._shape[:2] != xs[:2]:
            fail(aapg.name, f"dout of shape {tuple(dout._shape)} does not fit input shape {xs}",
                 dout._shape)
        return [Meta(xs, dout.dtype)]

    @aapg.kernel("cpu")
    def _(ins, outs, attrs):
        _adaptive_apply(ins[0], outs[0], attrs["input_shape"][2:], ins[0].shape[2:], True)

    @aapg.grad
    def _(ctx, ddx):
        return ((F.adaptive_avg_pool_nd(ddx, tuple(ctx.input_metas[0][0][2:])),)
                + _zero_input_grad(ctx, 1))


    for op, n_out, sized in ((mp, 2, False), (mpg, 1, True), (ap, 1, False), (apg, 1, True),
                             (aap, 1, False), (aapg, 1, True)):
        op.sbp(plane_rule(n_out, sized))


for _n in (1, 2, 3):
    _register(_n)
