"""Normalisation ops: batch_norm, layer_norm, group_norm and their gradient ops.

Each forward op returns the normalised output plus the statistics backward needs (mean and
inverse standard deviation) as extra outputs. Optional affine ``weight``/``bias`` inputs follow
the fixed inputs, flagged by the attrs ``has_weight`` / ``has_bias``.

``batch_norm`` takes the running statistics as inputs 1 and 2 and, in training mode, updates
them in place (``mutates=(1, 2)``; the variance with Bessel's correction, as PyTorch does).
``batch_norm_batch_stats`` is the training-mode variant without running statistics. Its
kernels work in place in the output with per-channel sums as BLAS row sums of the (N*C, rest)
matrix, and correct the rounded batch mean by the centred values' own mean (as layer_norm).
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, ones_vector
from actorflow.ops.boxing import B, P, S, Sig
from actorflow.ops.conv import compute_array
from actorflow.ops.registry import CRow, Meta, fail, register


def _affine(inputs, attrs, first: int):
    """(weight, bias) from the optional trailing inputs (None where absent)."""
    i = first
    w = b = None
    if attrs.get("has_weight"):
        w, i = inputs[i], i + 1
    if attrs.get("has_bias"):
        b = inputs[i]
    return w, b


def _check_float(name, x):
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating point input, got {x.dtype}")


def _check_param(name, what, t, shape, xs):
    if t is not None and tuple(t._shape) != tuple(shape):
        fail(name, f"{what} must have shape {tuple(shape)}, got {tuple(t._shape)}", xs)


def _grad_outputs(ctx, grads, first: int) -> tuple:
    """Map (dx, dweight, dbias) onto the op's inputs (running stats get None)."""
    dx, dw, db = grads
    need = ctx.needs_input_grad
    res = [dx if need[0] else None] + [None] * (first - 1)
    if ctx.attrs.get("has_weight"):
        res.append(dw if need[len(res)] else None)
    if ctx.attrs.get("has_bias"):
        res.append(db if need[len(res)] else None)
    return tuple(res)


# ---- batch norm -------------------------------------------------------------------------------

def _bn_shape(name, inputs, attrs, first):
    x = inputs[0]
    _check_float(name, x)
    xs = x._shape
    if len(xs) < 2:
        fail(name, "expected an input with at least 2 dims (N, C, ...)", xs)
    C = xs[1]
    for i in range(1, first):
        _check_param(name, "running_mean" if i == 1 else "running_var", inputs[i], (C,), xs)
    w, b = _affine(inputs, attrs, first)
    _check_param(name, "weight", w, (C,), xs)
    _check_param(name, "bias", b, (C,), xs)
    count = 1
    for i, s in enumerate(xs):
        if i != 1:
            count *= s
    if attrs.get("training") and count <= 1:
        fail(name, f"expected more than 1 value per channel when training, got input of size "
             f"{tuple(xs)}", xs)
    return [Meta(xs, x.dtype), Meta((C,), x.dtype), Meta((C,), x.dtype)]


def _channel_view(a, ndim):
    return a.reshape((-1,) + (1,) * (ndim - 2))


def _rows_and_sums(x: np.ndarray) -> tuple:
    """(``x`` as an (N*C, rest) matrix, a function summing such a matrix per channel): row
    sums are matrix-vector products (BLAS), then N rows per channel are added."""
    N, C = x.shape[:2]
    hw = x.size // (N * C)
    rows = x.reshape(N * C, hw)

    def per_channel(a2: np.ndarray, other: np.ndarray | None = None) -> np.ndarray:
        r = (np.einsum("ij,ij->i", a2, other) if other is not None
             else a2 @ ones_vector(hw, a2.dtype))
        return r.reshape(N, C).sum(axis=0)
    return rows, per_channel


def _drop_shift(centred: np.ndarray, shift: np.ndarray, invstd: np.ndarray, shape: tuple):
    """Take from the ``centred`` values what rounding left of the mean in them (``shift``,
    reshaped to ``shape`` to broadcast) when it moves the normalised values, ``|shift| *
    invstd``, by more than a few ulps (else the pass is not worth it; rows of (nearly) equal
    values need it)."""
    if np.max(np.abs(shift) * invstd) > 8 * np.finfo(centred.dtype).eps:
        np.subtract(centred, shift.reshape(shape), out=centred, casting="unsafe")


def _bn_kernel(ins, outs, attrs, first):
    # a few passes in place, in the output: y = (x - mean) * (invstd * w) + b; per-channel sums
    # as BLAS row sums (x is (N, C, ...), C-contiguous here)
    x = np.ascontiguousarray(compute_array(ins[0]))
    w, b = _affine(ins, attrs, first)
    y, save_mean, save_invstd = outs
    if x.size == 0:  # evaluation, or no channels (training needs values: see _bn_shape)
        if not attrs["training"]:
            save_mean[...] = compute_array(ins[1])
            save_invstd[...] = 1.0 / np.sqrt(compute_array(ins[2]) + attrs["eps"])
        return
    rows, per_channel = _rows_and_sums(x)
    yb = y if y.dtype == x.dtype and y.flags.c_contiguous else np.empty(x.shape, x.dtype)
    if attrs["training"]:
        m = x.size // x.shape[1]
        mean = per_channel(rows) / m
        np.subtract(x, _channel_view(mean, x.ndim), out=yb)
        y2 = yb.reshape(rows.shape)
        # what rounding left of the mean in the centred values (a few ulps of a large mean can
        # be much of a small spread): it corrects the mean, the variance and the centred values
        shift = per_channel(y2) / m
        var = np.maximum(per_channel(y2, y2) / m - shift * shift, 0)
        mean += shift
        invstd = 1.0 / np.sqrt(var + attrs["eps"])
        _drop_shift(yb, shift, invstd, (-1,) + (1,) * (x.ndim - 2))
        if first == 3:  # update the running statistics in place
            mom = attrs["momentum"]
            rm, rv = ins[1], ins[2]
            rm[...] = (1 - mom) * rm + mom * mean
            rv[...] = (1 - mom) * rv + mom * var * (m / (m - 1))
    else:
        mean = compute_array(ins[1])
        invstd = 1.0 / np.sqrt(compute_array(ins[2]) + attrs["eps"])
        np.subtract(x, _channel_view(mean, x.ndim), out=yb, casting="unsafe")
    scale = invstd if w is None else invstd * compute_array(w)
    np.multiply(yb, _channel_view(scale, x.ndim), out=yb, casting="unsafe")
    if b is not None:
        np.add(yb, _channel_view(compute_array(b), x.ndim), out=yb, casting="unsafe")
    if yb is not y:
        y[...] = yb
    save_mean[...] = mean
    save_invstd[...] = invstd


def _bn_grad(ctx, dout, first):
    if dout is None:
        return (None,) * len(ctx.needs_input_grad)
    x = ctx.inputs[0]
    w, _ = _affine(ctx.inputs, ctx.attrs, first)
    mean, invstd = ctx.outputs[1], ctx.outputs[2]
    grads = F.batch_norm_grad(dout, x, mean, invstd, w, ctx.attrs["training"])
    return _grad_outputs(ctx, grads, first)


batch_norm = register("batch_norm", mutates=(1, 2), grad_uses_outputs=True,
                      doc="Batch normalisation over dim 1 (inputs x, running_mean, running_var, "
                          "[weight], [bias]); outputs y, mean, invstd.", amp="deny")
batch_norm.infer(lambda inputs, attrs: _bn_shape("batch_norm", inputs, attrs, 3))
batch_norm.kernel("cpu")(lambda ins, outs, attrs: _bn_kernel(ins, outs, attrs, 3))
batch_norm.grad(lambda ctx, dout, _dm=None, _di=None: _bn_grad(ctx, dout, 3))

@batch_norm.sbp
def _(inputs, attrs):
    """Evaluation only (running statistics): x split on the batch or a spatial dim with the
    per-channel tensors broadcast, or on the channel dim with them split alike. Training
    needs each channel's statistics over every rank's samples: it runs broadcast."""
    if attrs.get("training"):
        return
    nd, n_ch = len(inputs[0]._shape), len(inputs) - 1
    for d in range(nd):
        ch = S(0) if d == 1 else B
        yield Sig((S(d),) + (ch,) * n_ch, (S(d), ch, ch))


batch_norm_batch_stats = register(
    "batch_norm_batch_stats", grad_uses_outputs=True,
    doc="Training-mode batch normalisation without running statistics (inputs x, [weight], "
        "[bias]); outputs y, mean, invstd.", amp="deny")
batch_norm_batch_stats.infer(
    lambda inputs, attrs: _bn_shape("batch_norm", inputs, dict(attrs, training=True), 1))
batch_norm_batch_stats.kernel("cpu")(
    lambda ins, outs, attrs: _bn_kernel(ins, outs, dict(attrs, training=True), 1))
batch_norm_batch_stats.grad(lambda ctx, dout, _dm=None, _di=None: _bn_grad(ctx, dout, 1))

batch_norm_grad = register("batch_norm_grad",
                           doc="Gradient of batch_norm: inputs dout, x, mean, invstd, [weight]; "
                               "outputs dx, dweight, dbias.", amp="deny")


@batch_norm_grad.infer
def _(inputs, attrs):
    x = inputs[1]
    C = x._shape[1]
    return [Meta(x._shape, x.dtype), Meta((C,), x.dtype), Meta((C,), x.dtype)]


@batch_norm_grad.kernel("cpu")
def _(ins, outs, attrs):
    # dx = scale (dout - sum(dout)/m - xc invstd^2 sum(dout xc)/m), xc = x - mean, built in
    # place in dx; sum(dout xc) gives dw (times invstd), sum(dout) db
    dout, x = (np.ascontiguousarray(compute_array(a)) for a in ins[:2])
    mean, invstd = (compute_array(a) for a in ins[2:4])
    w = compute_array(ins[4]) if attrs["has_weight"] else None
    dx, dw, db = outs
    nd = x.ndim
    if x.size == 0:
        dx[...] = 0
        dw[...] = 0
        db[...] = 0
        return
    rows, per_channel = _rows_and_sums(x)
    xc = dx if dx.dtype == x.dtype and dx.flags.c_contiguous else np.empty(x.shape, x.dtype)
    np.subtract(x, _channel_view(mean, nd), out=xc, casting="unsafe")
    drows = dout.reshape(rows.shape)
    sum_dy = per_channel(drows)
    sum_dy_xc = per_channel(drows, xc.reshape(rows.shape))
    if attrs["training"]:
        # the saved batch mean is rounded (by up to half an ulp of a large mean, which can be
        # much of a small spread): the centred values' own mean corrects it, as in the forward
        shift = per_channel(xc.reshape(rows.shape)) / (x.size // x.shape[1])
        sum_dy_xc -= shift * sum_dy
        _drop_shift(xc, shift, invstd, (-1,) + (1,) * (nd - 2))
    db[...] = sum_dy
    dw[...] = sum_dy_xc * invstd
    scale = invstd if w is None else invstd * w
    if attrs["training"]:
        m = x.size // x.shape[1]
        np.multiply(xc, _channel_view(-(invstd * invstd * sum_dy_xc / m), nd), out=xc,
                    casting="unsafe")
        np.subtract(xc, _channel_view(sum_dy / m, nd), out=xc, casting="unsafe")
        xc += dout
        np.multiply(xc, _channel_view(scale, nd), out=xc, casting="unsafe")
    else:
        np.multiply(dout, _channel_view(scale, nd), out=xc, casting="unsafe")
    if xc is not dx:
        dx[...] = xc


@batch_norm_grad.sbp
def _(inputs, attrs):
    """Evaluation's gradient (inputs dout, x, mean, invstd[, weight]): split as the forward;
    on a batch or spatial split the weight and bias gradients are partial sums."""
    if attrs.get("training"):
        return
    nd, n_ch = len(inputs[1]._shape), len(inputs) - 2
    for d in range(nd):
        ch = S(0) if d == 1 else B
        yield Sig((S(d), S(d)) + (ch,) * n_ch, (S(d),) + ((S(0),) * 2 if d == 1 else (P, P)))


def _no_double_backward(name):
    def rule(ctx, *douts):
        raise NotImplementedError(f"{name}: double backward (a gradient of the gradient) is "
                                  f"not supported")
    return rule


batch_norm_grad.grad(_no_double_backward("batch_norm"))


# ---- layer norm / group norm --------------------------------------------------------------------

def _normalize_last(x, axes, eps):
    """(xhat, mean, invstd) over ``axes`` with keepdims."""
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    invstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=axes, keepdims=True) + eps)
    return xc * invstd, mean, invstd


def _norm_backward(dxhat, xhat, invstd, axes):
    """dx from the gradient with respect to xhat (normalised over ``axes``)."""
    return invstd * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                     - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))


# layer_norm works on (rows, d) matrices: row and column sums are matrix-vector products (BLAS),
# several times faster than NumPy's reductions over short rows, and the elementwise steps run in
# place, the last ones in the output array.

def _rows_of(a: np.ndarray, d: int) -> np.ndarray:
    return np.ascontiguousarray(compute_array(a)).reshape(-1, d)


def _writable_rows(out: np.ndarray, dtype, d: int) -> tuple[np.ndarray, bool]:
    """(``out`` as a (rows, d) matrix, True), or a scratch matrix and False when ``out`` has
    another dtype or layout."""
    if out.dtype == dtype and out.flags.c_contiguous:
        return out.reshape(-1, d), True
    return np.empty((out.size // d, d), dtype), False


def _param_row(p: np.ndarray, dtype) -> np.ndarray:
    return compute_array(p).astype(dtype, copy=False).reshape(-1)


def _norm_size(x_shape: tuple, k: int) -> int:
    d = 1
    for s in x_shape[len(x_shape) - k:]:
        d *= s
    return d


layer_norm = register("layer_norm", grad_uses_outputs=True,
                      doc="Layer normalisation over the last ``normalized_ndim`` dims (inputs x, "
                          "[weight], [bias]); outputs y, mean, invstd.", amp="deny")


@layer_norm.infer
def _(inputs, attrs):
    x = inputs[0]
    _check_float("layer_norm", x)
    k = attrs["normalized_ndim"]
    xs = x._shape
    shape = tuple(attrs["normalized_shape"])
    if k == 0 or len(xs) < k or tuple(xs[len(xs) - k:]) != shape:
        fail("layer_norm", f"normalized_shape {shape} does not match the trailing dims of the "
             f"input", xs)
    w, b = _affine(inputs, attrs, 1)
    _check_param("layer_norm", "weight", w, shape, xs)
    _check_param("layer_norm", "bias", b, shape, xs)
    stat = tuple(xs[:len(xs) - k]) + (1,) * k
    return [Meta(xs, x.dtype), Meta(stat, x.dtype), Meta(stat, x.dtype)]


@layer_norm.sbp
def _(inputs, attrs):
    """x split on a batch dim (not normalised), weight and bias broadcast: y, mean and invstd
    split there."""
    nb = len(inputs[0]._shape) - attrs["normalized_ndim"]
    for d in range(nb):
        yield Sig((S(d),) + (B,) * (len(inputs) - 1), (S(d),) * 3)


@layer_norm.kernel("cpu")
def _(ins, outs, attrs):
    k = attrs["normalized_ndim"]
    d = _norm_size(ins[0].shape, k)
    w, b = _affine(ins, attrs, 1)
    y, mean_out, invstd_out = outs
    if d == 0 or ins[0].size == 0:  # nothing to normalise: NumPy's reductions give nan / empty
        x = compute_array(ins[0])
        with np.errstate(all="ignore"):
            xhat, mean, invstd = _normalize_last(x, tuple(range(x.ndim - k, x.ndim)),
                                                 attrs["eps"])
        y[...], mean_out[...], invstd_out[...] = xhat, mean, invstd
        return
    x = _rows_of(ins[0], d)
    y2, direct = _writable_rows(y, x.dtype, d)
    by_d = np.full(d, 1.0 / d, x.dtype)
    mean = x @ by_d
    np.subtract(x, mean[:, None], out=y2)
    # What rounding left of the mean in the centred rows: it corrects the variance and the mean
    # (a constant row then gets variance 0 and, below, the output ``bias`` exactly).
    shift = y2 @ by_d
    invstd = np.multiply(y2, y2) @ by_d  # the variance, then 1 / sqrt(var + eps) in place
    invstd -= shift * shift
    np.maximum(invstd, 0, out=invstd)
    invstd += attrs["eps"]
    np.sqrt(invstd, out=invstd)
    np.divide(1.0, invstd, out=invstd)
    mean += shift
    _drop_shift(y2, shift, invstd, (-1, 1))
    y2 *= invstd[:, None]
    if w is not None:
        y2 *= _param_row(w, x.dtype)
    if b is not None:
        y2 += _param_row(b, x.dtype)
    if not direct:
        y[...] = y2.reshape(y.shape)
    mean_out[...] = mean.reshape(mean_out.shape)
    invstd_out[...] = invstd.reshape(invstd_out.shape)


@layer_norm.grad
def _(ctx, dout, _dm=None, _di=None):
    if dout is None:
        return (None,) * len(ctx.needs_input_grad)
    w, _ = _affine(ctx.inputs, ctx.attrs, 1)
    grads = F.layer_norm_grad(dout, ctx.inputs[0], ctx.outputs[1], ctx.outputs[2], w,
                              ctx.attrs["normalized_ndim"])
    return _grad_outputs(ctx, grads, 1)


layer_norm_grad = register("layer_norm_grad", amp="deny",
                           doc="Gradient of layer_norm: inputs dout, x, mean, invstd, [weight]; "
                               "outputs dx, dweight, dbias (shaped like the normalised dims).")


@layer_norm_grad.infer
def _(inputs, attrs):
    x = inputs[1]
    k = attrs["normalized_ndim"]
    pshape = tuple(x._shape[len(x._shape) - k:])
    return [Meta(x._shape, x.dtype), Meta(pshape, x.dtype), Meta(pshape, x.dtype)]


@layer_norm_grad.sbp
def _(inputs, attrs):
    """dout, x, mean, invstd split on a batch dim, weight broadcast: dx split there, the
    weight and bias gradients partial sums."""
    nb = len(inputs[1]._shape) - attrs["normalized_ndim"]
    for d in range(nb):
        yield Sig((S(d),) * 4 + (B,) * (len(inputs) - 4), (S(d), P, P))


@layer_norm_grad.kernel("cpu")
def _(ins, outs, attrs):
    # dx = invstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dout * w; the row
    # means of dxhat and dxhat * xhat are dout @ w / d and (dout * xhat) @ w / d
    k = attrs["normalized_ndim"]
    d = _norm_size(ins[1].shape, k)
    dx_out, dw_out, db_out = outs
    if d == 0 or ins[1].size == 0:
        dx_out[...] = 0
        dw_out[...] = 0
        db_out[...] = 0
        return
    dout, x = _rows_of(ins[0], d), _rows_of(ins[1], d)
    mean, invstd = (compute_array(a).astype(x.dtype, copy=False).reshape(-1) for a in ins[2:4])
    w = _param_row(ins[4], x.dtype) if attrs["has_weight"] else None
    by_d = np.full(d, 1.0 / d, x.dtype) if w is None else w / d
    xc = np.subtract(x, mean[:, None])
    prod = np.multiply(dout, xc)  # dout * xhat / invstd
    dw_out[...] = (invstd @ prod).reshape(dw_out.shape)
    db_out[...] = (ones_vector(x.shape[0], x.dtype) @ dout).reshape(db_out.shape)
    xc *= ((prod @ by_d) * (invstd * invstd * invstd))[:, None]  # xhat * mean(dxhat xhat)
    m1 = (dout @ by_d) * invstd
    dx, direct = _writable_rows(dx_out, x.dtype, d)
    if w is None:  # the inputs are not read after this first write of dx
        np.multiply(dout, invstd[:, None], out=dx)
    else:
        np.multiply(dout, w, out=dx)
        dx *= invstd[:, None]
    dx -= xc
    dx -= m1[:, None]
    if not direct:
        dx_out[...] = dx.reshape(dx_out.shape)


layer_norm_grad.grad(_no_double_backward("layer_norm"))


# ---- how layer_norm and its gradient compute one row in generated C (registry.py: c_row) ----
# The same arithmetic as the kernels above: the mean, the centred rows' leftover mean (shift)
# correcting mean and variance, a variance below 0 clamped (NaN stays NaN), then
# 1 / sqrt(var + eps); the row sums may be reordered (vectorised). The gradient's last loop is
# marked ``omp simd`` too, without a reduction: its iterations are independent (dx may be
# written over dout, element by element after reading it; the weight and bias gradients are
# the chunk's own partial rows), and GCC would otherwise give up on proving its eight arrays
# apart and leave it scalar (measured: 1024 x 128 on one thread 170 -> 65 us).

def _layer_norm_row(attrs, n_inputs):
    w, b = attrs.get("has_weight"), attrs.get("has_bias")
    if n_inputs != 1 + bool(w) + bool(b):
        return None
    scale = " * X1(i)" if w else ""
    shift = f" + X{1 + bool(w)}(i)" if b else ""
    params = ("param",) * (n_inputs - 1)
    return CRow(f"""
$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) s += X0(i);
$T mean = s / ($T)n, sc = 0, sq = 0;
#pragma omp simd reduction(+:sc, sq)
for (int64_t i = 0; i < n; i++) {{ $T c = X0(i) - mean; sc += c; sq += c * c; }}
const $T shift = sc / ($T)n;
$T var = sq / ($T)n - shift * shift;
var = var < 0 ? ($T)0 : var;
const $T inv = ($T)1 / sqrt(var + $eps);
mean += shift;
#pragma omp simd
for (int64_t i = 0; i < n; i++) Y0(i, ((X0(i) - mean) * inv){scale}{shift});
Y1(0, mean);
Y2(0, inv);
""", ("row",) + params + ("row", "stat", "stat"), attrs["normalized_ndim"], ((0, 0),))


def _layer_norm_grad_row(attrs, n_inputs):
    w = attrs.get("has_weight")
    if n_inputs != 4 + bool(w):
        return None
    gw = "X0(i) * X4(i)" if w else "X0(i)"
    return CRow(f"""
const $T mu = X2(0), inv = X3(0);
$T s1 = 0, s2 = 0;
#pragma omp simd reduction(+:s1, s2)
for (int64_t i = 0; i < n; i++) {{
    const $T g = {gw}, xh = (X1(i) - mu) * inv;
    s1 += g; s2 += g * xh;
}}
const $T m1 = s1 / ($T)n, m2 = s2 / ($T)n;
#pragma omp simd
for (int64_t i = 0; i < n; i++) {{
    const $T xh = (X1(i) - mu) * inv, g = X0(i);
    Y0(i, (({gw}) - m1 - xh * m2) * inv);
    Y1(i, g * xh);
    Y2(i, g);
}}
""", ("row", "row", "stat", "stat") + ("param",) * bool(w) + ("row", "sum", "sum"),
        attrs["normalized_ndim"], ((0, 0), (0, 1)))


layer_norm.c_row = _layer_norm_row
layer_norm_grad.c_row = _layer_norm_grad_row


group_norm = register("group_norm", grad_uses_outputs=True,
                      doc="Group normalisation of (N, C, ...) over ``num_groups`` channel groups "
                          "(inputs x, [weight], [bias]); outputs y, mean, invstd of shape "
                          "(N, groups).", amp="deny")


@group_norm.infer
def _(inputs, attrs):
    x = inputs[0]
    _check_float("group_norm", x)
    xs = x._shape
    g = attrs["num_groups"]
    if len(xs) < 2:
        fail("group_norm", "expected an input with at least 2 dims (N, C, ...)", xs)
    if g <= 0 or xs[1] % g:
        fail("group_norm", f"the number of channels ({xs[1]}) must be divisible by num_groups "
             f"({g})", xs)
    w, b = _affine(inputs, attrs, 1)
    _check_param("group_norm", "weight", w, (xs[1],), xs)
    _check_param("group_norm", "bias", b, (xs[1],), xs)
    return [Meta(xs, x.dtype), Meta((xs[0], g), x.dtype), Meta((xs[0], g), x.dtype)]


@group_norm.sbp
def _(inputs, attrs):
    """As OneFlow: x split along the batch, weight and bias broadcast; y, mean and invstd
    split there."""
    yield Sig((S(0),) + (B,) * (len(inputs) - 1), (S(0),) * 3)


@group_norm.kernel("cpu")
def _(ins, outs, attrs):
    x = compute_array(ins[0])
    w, b = _affine(ins, attrs, 1)
    N, g = x.shape[0], attrs["num_groups"]
    xhat, mean, invstd = _normalize_last(x.reshape(N, g, -1), (2,), attrs["eps"])
    y = xhat.reshape(x.shape)
    if w is not None:
        y *= _channel_view(w, x.ndim)
    if b is not None:
        y += _channel_view(b, x.ndim)
    outs[0][...] = y
    outs[1][...] = mean[..., 0]
    outs[2][...] = invstd[..., 0]


@group_norm.grad
def _(ctx, dout, _dm=None, _di=None):
    if dout is None:
        return (None,) * len(ctx.needs_input_grad)
    w, _ = _affine(ctx.inputs, ctx.attrs, 1)
    grads = F.group_norm_grad(dout, ctx.inputs[0], ctx.outputs[1], ctx.outputs[2], w)
    return _grad_outputs(ctx, grads, 1)


group_norm_grad = register("group_norm_grad",
                           doc="Gradient of group_norm: inputs dout, x, mean, invstd, [weight]; "
                               "outputs dx, dweight, dbias.", amp="deny")


@group_norm_grad.infer
def _(inputs, attrs):
    x = inputs[1]
    return [Meta(x._shape, x.dtype), Meta((x._shape[1],), x.dtype),
            Meta((x._shape[1],), x.dtype)]


@group_norm_grad.sbp
def _(inputs, attrs):
    """dout, x, mean, invstd split along the batch, weight broadcast: dx split there, the
    weight and bias gradients partial sums."""
    yield Sig((S(0),) * 4 + (B,) * (len(inputs) - 4), (S(0), P, P))


@group_norm_grad.kernel("cpu")
def _(ins, outs, attrs):
    dout, x, mean, invstd = (compute_array(a) for a in ins[:4])
    N, g = mean.shape
    xg = x.reshape(N, g, -1)
    xhat = (xg - mean[..., None]) * invstd[..., None]
    chan = (0,) + tuple(range(2, x.ndim))
    outs[1][...] = (dout * xhat.reshape(x.shape)).sum(axis=chan)
    outs[2][...] = dout.sum(axis=chan)
    dxhat = dout * _channel_view(compute_array(ins[4]), x.ndim) if attrs["has_weight"] else dout
    dx = _norm_backward(dxhat.reshape(N, g, -1), xhat, invstd[..., None], (2,))
    outs[0][...] = dx.reshape(x.shape)


group_norm_grad.grad(_no_double_backward("group_norm"))
