"""Neural-network ops: linear, softmax / log_softmax, dropout, embedding (and their gradients).

Convolutions live in ``conv``, pooling in ``pool``, normalisation in ``normalization``.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework.dtype import bool_
from actorflow.ops._common import F, norm_axis, sum_keepdim
from actorflow.ops.conv import compute_array
from actorflow.ops.reduce import ROW_MAX
from actorflow.ops.boxing import B, P, S, Sig, elementwise_rule
from actorflow.ops.registry import CRow, Meta, fail, register
from actorflow.random import numpy_rng

# ---- linear -----------------------------------------------------------------------------------

linear = register("linear", bias_act_epilogue=True, add_to_output=True, bias_input=2, amp="allow",
                  doc="x @ weight.T + bias with weight (out, in): one GEMM over all leading "
                      "dims of x.")


@linear.infer
def _(inputs, attrs):
    x, w = inputs[0], inputs[1]
    xs, ws = x._shape, w._shape
    if len(ws) != 2:
        fail("linear", "weight must be 2-d (out_features, in_features)", xs, ws)
    if not xs or xs[-1] != ws[1]:
        fail("linear", f"input's last dim ({xs[-1] if xs else None}) must equal "
             f"in_features ({ws[1]})", xs, ws)
    if x.dtype is not w.dtype:
        raise TypeError(f"linear: input and weight dtypes differ ({x.dtype} vs {w.dtype})")
    if len(inputs) > 2:
        b = inputs[2]
        if tuple(b._shape) != (ws[0],):
            fail("linear", f"bias must have shape ({ws[0]},), got {tuple(b._shape)}", xs, ws)
        if b.dtype is not x.dtype:
            raise TypeError(f"linear: bias dtype {b.dtype} differs from input dtype {x.dtype}")
    return [Meta(tuple(xs[:-1]) + (ws[0],), x.dtype)]


@linear.sbp
def _(inputs, attrs):
    """x split along a leading dim -> the result split there; weight (and bias) split by
    output features -> the last dim split; x's features and weight's inputs split -> partial
    sums (the bias joins on the first rank); partial x -> partial result."""
    nx, bias = len(inputs[0]._shape), len(inputs) > 2
    for d in range(nx - 1):
        yield Sig((S(d), B) + ((B,) if bias else ()), (S(d),))
    yield Sig((B, S(0)) + ((S(0),) if bias else ()), (S(nx - 1),))
    yield Sig((S(nx - 1), S(1)) + ((P,) if bias else ()), (P,))
    yield Sig((P, B) + ((P,) if bias else ()), (P,))


@linear.kernel("cpu")
def _(ins, outs, attrs):
    x, w = compute_array(ins[0]), compute_array(ins[1])
    out = outs[0]
    x2 = x.reshape(-1, x.shape[-1])
    target = out.reshape(-1, out.shape[-1])
    if target.dtype == x2.dtype:
        np.matmul(x2, w.T, out=target)
        if len(ins) > 2:
            target += ins[2]
        return
    res = np.matmul(x2, w.T)  # half precision: the bias is added before the one rounding
    if len(ins) > 2:
        res += compute_array(ins[2])
    np.copyto(target, res, casting="unsafe")


@linear.grad
def _(ctx, dout):
    x, w = ctx.inputs[0], ctx.inputs[1]
    need = ctx.needs_input_grad
    xs, ws = x._shape, w._shape
    d2 = F.reshape(dout, (-1, ws[0]))
    dx = F.reshape(F.matmul(d2, w), xs) if need[0] else None
    dw = F.matmul(d2, F.reshape(x, (-1, ws[1])), transpose_a=True) if need[1] else None
    if len(need) == 2:
        return dx, dw
    return dx, dw, (F.sum(d2, dim=0) if need[2] else None)


# ---- softmax / log_softmax --------------------------------------------------------------------

def _softmax_infer(name):
    def infer(inputs, attrs):
        x = inputs[0]
        if not x.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating point input, got {x.dtype}")
        norm_axis(name, attrs["dim"], len(x._shape))
        return [Meta(x._shape, x.dtype)]
    return infer


def _shifted(x, dim, safe):
    """``x - max(x, dim)``; with ``safe`` a row of only -inf is shifted by 0 instead of -inf."""
    m = np.max(x, axis=dim, keepdims=True) if x.size else np.zeros_like(x)
    if safe:
        m = np.where(np.isneginf(m), 0, m)
    return x - m


softmax = register("softmax", grad_uses_outputs=True, amp="deny",
                   doc="exp(x) / sum(exp(x)) along ``dim`` (max-shifted). With ``safe`` a row "
                       "of only -inf gives zeros (used by attention with fully masked rows).")
softmax.infer(_softmax_infer("softmax"))


def _along_other_dims(inputs, attrs):
    """Ops along ``attrs["dim"]`` (softmax, log_softmax and their gradients): any other dim
    split, on every input and output alike."""
    shape = tuple(inputs[0]._shape)
    dim = attrs["dim"] % max(len(shape), 1)
    for d in range(len(shape)):
        if d != dim:
            yield Sig((S(d),) * len(inputs), (S(d),))


softmax.sbp(_along_other_dims)


@softmax.kernel("cpu")
def _(ins, outs, attrs):
    x = compute_array(ins[0])
    dim = attrs["dim"] % max(x.ndim, 1) if x.ndim else None
    e = np.exp(_shifted(x, dim, attrs.get("safe", False)))
    s = sum_keepdim(e, dim)
    if attrs.get("safe", False):
        s[s == 0] = 1
    np.divide(e, s, out=outs[0], casting="unsafe")


@softmax.grad
def _(ctx, dout):
    return F.softmax_grad(dout, ctx.outputs[0], ctx.attrs["dim"])


log_softmax = register("log_softmax", grad_uses_outputs=True,
                       doc="x - logsumexp(x) along ``dim`` (max-shifted).", amp="deny")
log_softmax.infer(_softmax_infer("log_softmax"))
log_softmax.sbp(_along_other_dims)


@log_softmax.kernel("cpu")
def _(ins, outs, attrs):
    x = compute_array(ins[0])
    dim = attrs["dim"] % max(x.ndim, 1) if x.ndim else None
    z = _shifted(x, dim, False)
    np.subtract(z, np.log(sum_keepdim(np.exp(z), dim)), out=outs[0], casting="unsafe")


@log_softmax.grad
def _(ctx, dout):
    return F.log_softmax_grad(dout, ctx.outputs[0], ctx.attrs["dim"])


def _grad_infer(inputs, attrs):
    dout, y = inputs
    if tuple(dout._shape) != tuple(y._shape):
        raise ValueError(f"dout {tuple(dout._shape)} and output {tuple(y._shape)} differ")
    return [Meta(y._shape, y.dtype)]


softmax_grad = register("softmax_grad", doc="y * (dout - sum(dout * y, dim)): the gradient of "
                                            "softmax from its output y.", amp="deny")
softmax_grad.infer(_grad_infer)
softmax_grad.sbp(_along_other_dims)


@softmax_grad.kernel("cpu")
def _(ins, outs, attrs):
    g, y = compute_array(ins[0]), compute_array(ins[1])
    dim = attrs["dim"] % max(y.ndim, 1) if y.ndim else None
    np.multiply(y, g - sum_keepdim(g * y, dim), out=outs[0], casting="unsafe")


@softmax_grad.grad
def _(ctx, ggx):
    g, y = ctx.inputs
    dim = ctx.attrs["dim"]
    need = ctx.needs_input_grad
    dg = F.softmax_grad(ggx, y, dim) if need[0] else None
    dy = None
    if need[1]:
        s = F.sum(F.mul(g, y), dim=dim, keepdim=True)
        t = F.sum(F.mul(ggx, y), dim=dim, keepdim=True)
        dy = F.sub(F.mul(ggx, F.sub(g, s)), F.mul(g, t))
    return dg, dy


log_softmax_grad = register("log_softmax_grad", amp="deny",
                            doc="dout - exp(y) * sum(dout, dim): the gradient of log_softmax "
                                "from its output y.")
log_softmax_grad.infer(_grad_infer)
log_softmax_grad.sbp(_along_other_dims)


@log_softmax_grad.kernel("cpu")
def _(ins, outs, attrs):
    g, y = compute_array(ins[0]), compute_array(ins[1])
    dim = attrs["dim"] % max(y.ndim, 1) if y.ndim else None
    np.subtract(g, np.exp(y) * sum_keepdim(g, dim), out=outs[0], casting="unsafe")


@log_softmax_grad.grad
def _(ctx, ggx):
    g, y = ctx.inputs
    dim = ctx.attrs["dim"]
    need = ctx.needs_input_grad
    p = F.exp(y)
    dg = F.sub(ggx, F.sum(F.mul(ggx, p), dim=dim, keepdim=True)) if need[0] else None
    dy = F.neg(F.mul(F.mul(ggx, p), F.sum(g, dim=dim, keepdim=True))) if need[1] else None
    return dg, dy


# how softmax, log_softmax and their gradients compute one row in generated C (ops/registry.py:
# c_row), for dim=-1 only: the kernels above element by element (the max as np.max: NaN wins,
# ROW_MAX of ops/reduce.py); the row sums may be reordered (vectorised); softmax keeps its
# exponentials in a scratch row of the computing type, so float16 / bfloat16 outputs still
# divide float32 values

def _softmax_row(attrs, n_inputs):
    if attrs.get("dim") != -1 or n_inputs != 1:
        return None
    safe = "if (m == -INFINITY) m = 0;\n" if attrs.get("safe", False) else ""
    fix = "if (s == 0) s = 1;\n" if attrs.get("safe", False) else ""
    return CRow(ROW_MAX + safe + """$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) { const $T e = af_exp(X0(i) - m); S0(i) = e; s += e; }
""" + fix + "for (int64_t i = 0; i < n; i++) Y0(i, S0(i) / s);",
                ("row", "row"), in_place=((0, 0),), scratch=1)


def _log_softmax_row(attrs, n_inputs):
    if attrs.get("dim") != -1 or n_inputs != 1:
        return None
    return CRow(ROW_MAX + """$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) s += af_exp(X0(i) - m);
const $T ls = log(s);
for (int64_t i = 0; i < n; i++) Y0(i, (X0(i) - m) - ls);""", ("row", "row"),
                in_place=((0, 0),))


def _grad_row(reduce_term: str, out: str):
    def form(attrs, n_inputs):
        if attrs.get("dim") != -1 or n_inputs != 2:
            return None
        return CRow(f"""$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) s += {reduce_term};
for (int64_t i = 0; i < n; i++) Y0(i, {out});""", ("row", "row", "row"),
                    in_place=((0, 0), (0, 1)))
    return form


softmax.c_row = _softmax_row
log_softmax.c_row = _log_softmax_row
softmax_grad.c_row = _grad_row("X0(i) * X1(i)", "X1(i) * (X0(i) - s)")
log_softmax_grad.c_row = _grad_row("X0(i)", "X0(i) - af_exp(X1(i)) * s")


# ---- dropout ----------------------------------------------------------------------------------

dropout = register("dropout", random=True, grad_uses_outputs=True,
                   doc="Zero each element with probability ``p`` and scale the rest by "
                       "1/(1-p); outputs y and the boolean keep-mask.")


@dropout.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x.dtype.is_floating_point:
        raise TypeError(f"dropout: expected a floating point input, got {x.dtype}")
    p = attrs["p"]
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    return [Meta(x._shape, x.dtype), Meta(x._shape, bool_)]


def dropout_scale(p: float) -> float:
    """The factor kept elements are multiplied by (0 when everything is dropped)."""
    return 0.0 if p >= 1.0 else 1.0 / (1.0 - p)


@dropout.kernel("cpu")
def _(ins, outs, attrs):
    x, (y, mask) = ins[0], outs
    p = attrs["p"]
    rng = numpy_rng(attrs["seed"])
    draw = np.float64 if x.dtype == np.float64 else np.float32
    np.greater_equal(rng.random(x.shape, dtype=draw), p, out=mask)
    np.multiply(x, mask, out=y, casting="unsafe")
    y *= y.dtype.type(dropout_scale(p))


@dropout.grad
def _(ctx, dout, _dmask=None):
    return F.dropout_grad(dout, ctx.outputs[1], dropout_scale(ctx.attrs["p"]))


dropout_grad = register("dropout_grad", elementwise=True, alias_safe=True,
                        doc="dout * mask * scale (the gradient of dropout).")


@dropout_grad.sbp
def _(inputs, attrs):
    """Elementwise; linear in dout, so a partial dout with a broadcast mask stays partial."""
    yield from elementwise_rule(inputs, attrs)
    yield Sig((P, B), (P,))


@dropout_grad.infer
def _(inputs, attrs):
    dout, mask = inputs
    if tuple(dout._shape) != tuple(mask._shape):
        raise ValueError("dout and mask shapes differ")
    return [Meta(dout._shape, dout.dtype)]


@dropout_grad.kernel("cpu")
def _(ins, outs, attrs):
    np.multiply(ins[0], ins[1], out=outs[0], casting="unsafe")
    outs[0] *= outs[0].dtype.type(attrs["scale"])


@dropout_grad.grad
def _(ctx, ggx):
    return F.dropout_grad(ggx, ctx.inputs[1], ctx.attrs["scale"]), None


# ---- embedding --------------------------------------------------------------------------------

def _check_indices(name, idx):
    if idx.dtype.is_floating_point or idx.dtype._category == 0:
        raise TypeError(f"{name}: indices must be an integer tensor, got {idx.dtype}")


embedding = register("embedding", doc="Rows of ``weight`` picked by integer ``indices`` "
                                      "(inputs indices, weight).")


@embedding.infer
def _(inputs, attrs):
    idx, w = inputs
    _check_indices("embedding", idx)
    if len(w._shape) != 2:
        fail("embedding", "weight must be 2-d (num_embeddings, embedding_dim)", idx._shape,
             w._shape)
    return [Meta(tuple(idx._shape) + (w._shape[1],), w.dtype)]


def _checked_rows(idx, n, name):
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].ravel()[0]
        raise IndexError(f"{name}: index {int(bad)} is out of range for {n} embeddings")
    return idx


@embedding.sbp
def _(inputs, attrs):
    """Indices split on a dim, weight broadcast: the rows split on that dim."""
    for d in range(len(inputs[0]._shape)):
        yield Sig((S(d), B), (S(d),))


@embedding.kernel("cpu")
def _(ins, outs, attrs):
    idx, w = ins
    np.take(w, _checked_rows(idx, w.shape[0], "embedding"), axis=0, out=outs[0])


@embedding.grad
def _(ctx, dout):
    idx = ctx.inputs[0]
    a = ctx.attrs
    return None, F.embedding_grad(dout, idx, ctx.input_metas[1][0][0], a.get("padding_idx"),
                                  a.get("scale_grad_by_freq", False))


embedding_grad = register("embedding_grad",
                          doc="Scatter-add dout rows into a (num_weights, dim) gradient; the "
                              "padding_idx row gets none.")


@embedding_grad.infer
def _(inputs, attrs):
    dout, idx = inputs
    _check_indices("embedding_grad", idx)
    if tuple(dout._shape[:-1]) != tuple(idx._shape):
        fail("embedding_grad", "dout must have the indices' shape plus one dim", dout._shape,
             idx._shape)
    return [Meta((attrs["num_weights"], dout._shape[-1]), dout.dtype)]


@embedding_grad.sbp
def _(inputs, attrs):
    """dout and indices split on one of the indices' dims: each rank scatters its rows, so the
    weight gradient is a partial sum (not with scale_grad_by_freq, whose counts are global)."""
    if attrs.get("scale_grad_by_freq"):
        return
    for d in range(len(inputs[1]._shape)):
        yield Sig((S(d), S(d)), (P,))


@embedding_grad.kernel("cpu")
def _(ins, outs, attrs):
    # Rows are summed per index by sorting the indices and one np.add.reduceat over the sorted
    # rows: ~10-20x faster than np.add.at, and as accurate (the sums are not in np.add.at's
    # order, so they may differ from it in the last bits).
    dout, out = compute_array(ins[0]), outs[0]
    n = out.shape[0]
    idx = _checked_rows(ins[1].reshape(-1), n, "embedding_grad").astype(np.intp, copy=False)
    g = dout.reshape(idx.size, dout.shape[-1])
    out.fill(0)
    if idx.size:
        counts = np.bincount(idx, minlength=n)
        if counts.max() == 1:  # no repeats: a plain scatter
            out[idx] = g
        else:
            key = idx.astype(np.uint16) if n <= 1 << 16 else idx  # small ints sort by radix
            order = np.argsort(key, kind="stable")
            rows = idx[order]
            starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
            sums = np.add.reduceat(np.take(g, order, axis=0), starts, axis=0)
            rows = rows[starts]
            if attrs.get("scale_grad_by_freq"):
                sums /= counts[rows][:, None]
            out[rows] = sums
    if attrs.get("padding_idx") is not None:
        out[attrs["padding_idx"]] = 0


@embedding_grad.grad
def _(ctx, ddw):
    if ctx.attrs.get("padding_idx") is not None or ctx.attrs.get("scale_grad_by_freq"):
        raise NotImplementedError("embedding: double backward with padding_idx or "
                                  "scale_grad_by_freq is not supported")
    return F.embedding(ctx.inputs[1], ddw), None


embedding_renorm = register("embedding_renorm",
                            doc="Rescale the rows of ``weight`` that ``indices`` use to norm at "
                                "most ``max_norm`` (run in place on the weight).")


@embedding_renorm.infer
def _(inputs, attrs):
    w, idx = inputs
    _check_indices("embedding_renorm", idx)
    return [Meta(w._shape, w.dtype)]


@embedding_renorm.kernel("cpu")
def _(ins, outs, attrs):
    w, idx = ins
    out = outs[0]
    if out is not w:
        out[...] = w
    rows = np.unique(_checked_rows(idx, w.shape[0], "embedding_renorm"))
    norms = np.linalg.norm(out[rows].astype(np.float64), ord=attrs["norm_type"], axis=1)
    big = norms > attrs["max_norm"]
    scale = attrs["max_norm"] / (norms[big] + 1e-7)
    out[rows[big]] *= scale[:, None].astype(out.dtype)
