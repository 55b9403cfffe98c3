"""Reductions over axes (``dim``, with ``keepdim``): sum, mean, prod, var, std, logsumexp,
all, any, and the scans cumsum / cumprod.

The max/min family and norms live in ``reduce_extrema``. Axis attrs are ``None`` (every axis),
an int, or a tuple of ints; ``reduce_axes`` turns them into a sorted tuple of axes.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, HALF_DTYPES, acc_dtype, blas_sum, in_float32, norm_axis
from actorflow.ops.boxing import P, S, Sig, shard_range
from actorflow.ops.registry import CRow, Meta, fail, register


def reduce_axes(name: str, dim, ndim: int) -> tuple:
    """Sorted axes for ``dim``: None or an empty sequence means every axis (as in PyTorch)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dims = (dim,)
    elif isinstance(dim, (tuple, list)):
        dims = tuple(dim)
    else:
        fail(name, f"dim must be an int or a tuple of ints, got {dim!r}")
    if not dims:
        return tuple(range(ndim))
    axes = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            fail(name, f"dim must be an int or a tuple of ints, got {dim!r}")
        axes.append(norm_axis(name, int(d), ndim))
    if len(set(axes)) != len(axes):
        fail(name, f"a dim appears multiple times in the list of dims {tuple(dims)}")
    return tuple(sorted(axes))


def reduced_shape(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def np_axes(x: np.ndarray, name: str, dim):
    """The ``axis`` argument for NumPy (0-d arrays take ``None``)."""
    return reduce_axes(name, dim, x.ndim) if x.ndim else None


def reduce_infer(name: str, dtype_rule):
    """Inference for a one-output reduction; ``dtype_rule(input_dtype, attrs)``."""
    def infer(inputs, attrs):
        x = inputs[0]
        axes = reduce_axes(name, attrs.get("dim"), len(x._shape))
        return [Meta(reduced_shape(x._shape, axes, attrs.get("keepdim", False)),
                     dtype_rule(x.dtype, attrs))]
    return infer


def int_to_long(d, attrs):
    """Sum-like dtype: ``dtype=`` wins; bool and integers accumulate in int64."""
    if attrs.get("dtype") is not None:
        return attrs["dtype"]
    return dt.int64 if d._category < 2 else d


def float_only(name: str):
    def rule(d, attrs):
        if attrs.get("dtype") is not None:
            return attrs["dtype"]
        if not d.is_differentiable:  # floating or complex
            raise TypeError(f"{name}: expected a floating point input, got {d} "
                            f"(pass dtype= or convert the input)")
        return d
    return rule


def unsqueeze_to(g, shape, dim, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input ``shape``."""
    if keepdim:
        return g
    axes = reduce_axes("reduce", dim, len(shape))
    return F.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(shape)))


def broadcast_back(ctx, g):
    """The reduced gradient ``g`` expanded back to the input's shape."""
    shape = ctx.input_metas[0][0]
    g = unsqueeze_to(g, shape, ctx.attrs.get("dim"), ctx.attrs.get("keepdim", False))
    return F.expand(g, shape)


def kept(ctx, y):
    """An output ``y`` of a reduction reshaped as if computed with ``keepdim=True``."""
    return unsqueeze_to(y, ctx.input_metas[0][0], ctx.attrs.get("dim"),
                        ctx.attrs.get("keepdim", False))


def count(shape: tuple, axes: tuple) -> int:
    """How many elements a reduction over ``axes`` of ``shape`` combines (1 for a 0-d tensor)."""
    if not shape:
        return 1
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def kept_dims_rule(name: str, partial=lambda attrs: False):
    """Reductions that do not decompose over a reduced dim (var, prod, logsumexp, all, ...):
    split on a dim the reduction leaves (where it lands in the output); ``partial(attrs)``
    true: the reduction is a sum, so a split reduced dim gives partial sums (as OneFlow's
    reduce ops, whose only partial signature is the sum's)."""
    def rule(inputs, attrs):
        shape = tuple(inputs[0]._shape)
        axes = reduce_axes(name, attrs.get("dim"), len(shape))
        keep = attrs.get("keepdim", False)
        for d in range(len(shape)):
            if d not in axes:
                yield Sig((S(d),), (S(d if keep else d - sum(1 for a in axes if a < d)),))
            elif partial(attrs):
                yield Sig((S(d),), (P,))
    return rule


# ---- sum, mean, prod ----------------------------------------------------------------------------

sum_ = register("sum", doc="Sum over ``dim`` (None: all).", amp="deny")
sum_.infer(reduce_infer("sum", int_to_long))


def _sum_into(x: np.ndarray, out: np.ndarray, axes, keepdim: bool) -> None:
    if axes is None or not blas_sum(x, axes, out):
        np.sum(x, axis=axes, out=out, keepdims=keepdim, dtype=out.dtype)


@sum_.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = np_axes(x, "sum", attrs.get("dim"))
    if out.dtype in HALF_DTYPES:
        in_float32(_sum_into, x, out, axes, attrs.get("keepdim", False))
    elif axes is None or not blas_sum(x, axes, out):
        np.sum(x, axis=axes, out=out, keepdims=attrs.get("keepdim", False), dtype=out.dtype)


@sum_.grad
def _(ctx, dout):
    return broadcast_back(ctx, dout)


def _reduce_sbp(mean: bool):
    """A sum over a split dim gives partial sums; a mean there too, each rank's mean scaled
    by its share of the dim; other split dims follow; partial sums stay partial (linear)."""
    def rule(inputs, attrs):
        shape = tuple(inputs[0]._shape)
        axes = reduce_axes("sum", attrs.get("dim"), len(shape))
        keep = attrs.get("keepdim", False)
        for d in range(len(shape)):
            if d in axes:
                post = None
                if mean:
                    if shape[d] == 0:
                        continue

                    def post(outs, attrs, index, n, size=shape[d]):
                        a, b = shard_range(size, n, index)
                        return [F.mul(outs[0], (b - a) / size)]
                yield Sig((S(d),), (P,), post)
            else:
                yield Sig((S(d),), (S(d if keep else d - sum(1 for a in axes if a < d)),))
        if attrs.get("dtype") is None or mean:
            yield Sig((P,), (P,))
    return rule


sum_.sbp(_reduce_sbp(False))


mean = register("mean", doc="Arithmetic mean over ``dim`` (None: all).", amp="deny")
mean.infer(reduce_infer("mean", float_only("mean")))


def _acc_dtype(out: np.ndarray):
    """Accumulate half precision in float32; float64 and complex stay as they are."""
    return out.dtype if out.dtype.kind == "c" or out.dtype == np.float64 else np.float32


@mean.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = np_axes(x, "mean", attrs.get("dim"))
    if axes is not None and blas_sum(x, axes, out):
        out /= count(x.shape, axes)
        return
    out[...] = np.mean(x, axis=axes, keepdims=attrs.get("keepdim", False),
                       dtype=_acc_dtype(out))


mean.sbp(_reduce_sbp(True))


@mean.grad
def _(ctx, dout):
    shape = ctx.input_metas[0][0]
    n = count(shape, reduce_axes("mean", ctx.attrs.get("dim"), len(shape)))
    return broadcast_back(ctx, F.mul(dout, 1.0 / max(n, 1)))


# how sum and mean over the last axis compute one row in generated C (ops/registry.py: c_row):
# the row summed in the computing type (float32 for float16 / bfloat16, as in_float32 does),
# in a vectorised order (the sum may be reordered); other dims, or a dtype cast, get no C form
def last_axis(attrs: dict, n_inputs: int) -> bool:
    """Whether a reduction call of one input reduces the last axis alone (dim -1 or (-1,)),
    without a dtype cast: the calls a row form over the last axis computes."""
    dim = attrs.get("dim")
    if isinstance(dim, (list, tuple)):
        dim = dim[0] if len(dim) == 1 else None
    return n_inputs == 1 and dim == -1 and attrs.get("dtype") is None


def _sum_row_form(scale: str):
    def form(attrs, n_inputs):
        if not last_axis(attrs, n_inputs):
            return None
        return CRow(f"""$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) s += X0(i);
Y0(0, s{scale});""", ("row", "stat"))
    return form


sum_.c_row = _sum_row_form("")
mean.c_row = _sum_row_form(" / ($T)n")


prod = register("prod", doc="Product over one ``dim`` (None: all elements).", amp="deny")
prod.infer(reduce_infer("prod", int_to_long))


@prod.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    args = (np_axes(x, "prod", attrs.get("dim")), attrs.get("keepdim", False))
    if out.dtype in HALF_DTYPES:
        in_float32(_prod_into, x, out, *args)
    else:
        _prod_into(x, out, *args)


def _prod_into(x: np.ndarray, out: np.ndarray, axes, keepdim: bool) -> None:
    np.prod(x, axis=axes, out=out, keepdims=keepdim, dtype=out.dtype)


prod.sbp(kept_dims_rule("prod"))


def exclusive_products(x, d: int):
    """``out[i] = prod_{j != i} x[j]`` along axis ``d``, exact when ``x`` holds zeros."""
    n = x._shape[d]
    if n <= 1:
        return F.ones_like(x)
    one = F.ones_like(F.narrow(x, d, 0, 1))
    left = F.cat([one, F.narrow(F.cumprod(x, d), d, 0, n - 1)], d)
    flipped = F.cumprod(F.flip(x, (d,)), d)
    right = F.flip(F.cat([one, F.narrow(flipped, d, 0, n - 1)], d), (d,))
    return F.mul(left, right)


@prod.grad
def _(ctx, dout):
    x = ctx.inputs[0]
    shape = ctx.input_metas[0][0]
    if ctx.attrs.get("dim") is None:
        others = F.reshape(exclusive_products(F.reshape(x, (-1,)), 0), shape)
    else:
        others = exclusive_products(x, norm_axis("prod", ctx.attrs["dim"], len(shape)))
    return F.mul(broadcast_back(ctx, dout), others)


# ---- variance, standard deviation, logsumexp -----------------------------------------------------

def float_input_infer(name):
    def rule(d, attrs):
        if not d.is_floating_point:
            raise TypeError(f"{name}: expected a floating point input, got {d}")
        return d
    return reduce_infer(name, rule)


def _centered(ctx):
    """``x - mean(x)`` over the reduced axes, and ``N - correction``."""
    x = ctx.inputs[0]
    shape = ctx.input_metas[0][0]
    axes = reduce_axes("var", ctx.attrs.get("dim"), len(shape))
    centered = F.sub(x, F.mean(x, axes, keepdim=True))
    return centered, count(shape, axes) - ctx.attrs.get("correction", 1)


var = register("var", doc="Variance over ``dim`` with ``correction`` (1: unbiased).", amp="deny")
var.infer(float_input_infer("var"))


@var.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        out[...] = np.var(x, axis=np_axes(x, "var", attrs.get("dim")), dtype=_acc_dtype(out),
                          ddof=attrs.get("correction", 1), keepdims=attrs.get("keepdim", False))


@var.grad
def _(ctx, dout):
    centered, dof = _centered(ctx)
    scale = 2.0 / dof if dof > 0 else float("nan")
    return F.mul(broadcast_back(ctx, F.mul(dout, scale)), centered)


var.sbp(kept_dims_rule("var"))


std = register("std", grad_uses_outputs=True, doc="Standard deviation over ``dim``.", amp="deny")
std.infer(float_input_infer("std"))


@std.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        out[...] = np.std(x, axis=np_axes(x, "std", attrs.get("dim")), dtype=_acc_dtype(out),
                          ddof=attrs.get("correction", 1), keepdims=attrs.get("keepdim", False))


@std.grad
def _(ctx, dout):
    centered, dof = _centered(ctx)
    scale = 1.0 / dof if dof > 0 else float("nan")
    g = F.div(F.mul(dout, scale), ctx.outputs[0])
    return F.mul(broadcast_back(ctx, g), centered)


std.sbp(kept_dims_rule("std"))


logsumexp = register("logsumexp", grad_uses_outputs=True,
                     doc="``log(sum(exp(x)))`` over ``dim``, computed stably.", amp="deny")
logsumexp.infer(float_input_infer("logsumexp"))


@logsumexp.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = np_axes(x, "logsumexp", attrs.get("dim"))
    if x.size == 0:
        out[...] = -np.inf
        return
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True, dtype=_acc_dtype(out))) + m
    out[...] = s if attrs.get("keepdim", False) else s.reshape(out.shape)


logsumexp.sbp(kept_dims_rule("logsumexp"))


@logsumexp.grad
def _(ctx, dout):
    x = ctx.inputs[0]
    weights = F.exp(F.sub(x, kept(ctx, ctx.outputs[0])))
    return F.mul(broadcast_back(ctx, dout), weights)


def row_extremum(cmp: str, op: str) -> str:
    """C statements of a row form: ``m``, the row's max (``">", "max"``) or min (``"<",
    "min"``) as np.max / np.min take it, NaN if the row holds one. Vectorised: a NaN flag beside
    an OpenMP max (min) reduction, whose order is free (of two equal zeros, +0 and -0, either
    may come out, as in NumPy's own loops)."""
    return f"""$T m = X0(0);
int isn = 0;
#pragma omp simd reduction({op}:m) reduction(|:isn)
for (int64_t i = 0; i < n; i++) {{ const $T v = X0(i); m = v {cmp} m ? v : m; isn |= v != v; }}
if (isn) m = NAN;
"""


# the row max; the row forms of softmax, logsumexp, the extrema and cross_entropy start from it
ROW_MAX = row_extremum(">", "max")


def _logsumexp_row(attrs, n_inputs):
    """logsumexp over the last axis in C as the kernel above: shifted by the row max unless it
    is inf or NaN, the exponentials summed in the computing type (the sum may be reordered);
    float16 / bfloat16 compute in float32 without rounding each exp to the storage dtype, so
    they agree with the kernel within an ulp of it."""
    if not last_axis(attrs, n_inputs):
        return None
    return CRow(ROW_MAX + """const $T c = isfinite(m) ? m : ($T)0;
$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) s += af_exp(X0(i) - c);
Y0(0, log(s) + c);""", ("row", "stat"))


logsumexp.c_row = _logsumexp_row


# ---- all / any -----------------------------------------------------------------------------------

def _logical(name: str, fn):
    op = register(name, doc=f"``{name}`` over ``dim`` (None: all); a bool result.")
    op.infer(reduce_infer(name, lambda d, attrs: dt.bool_))

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        x = ins[0]
        fn(x, axis=np_axes(x, name, attrs.get("dim")), out=outs[0],
           keepdims=attrs.get("keepdim", False))

    op.sbp(kept_dims_rule(name))
    return op


all_ = _logical("all", np.all)
any_ = _logical("any", np.any)


# ---- scans ---------------------------------------------------------------------------------------

def along_dim_rule(name: str, n_out: int, picks: bool = False, linear: bool = False):
    """The SBP rule of an op along ``attrs["dim"]`` (a scan, or one element picked per row when
    ``picks``): every input and output split along any other dim (a picked dim dropped without
    ``keepdim`` shifts the output dims after it); ``linear`` ops also take partial sums."""
    def rule(inputs, attrs):
        nd = len(inputs[0]._shape)
        if nd:
            dim = norm_axis(name, attrs["dim"], nd)
            keep = not picks or attrs.get("keepdim", False)
            for d in range(nd):
                if d != dim:
                    od = d if keep or d < dim else d - 1
                    yield Sig((S(d),) * len(inputs), (S(od),) * n_out)
        if linear:
            yield Sig((P,) * len(inputs), (P,) * n_out)
    return rule


def _scan_infer(name):
    def infer(inputs, attrs):
        x = inputs[0]
        norm_axis(name, attrs["dim"], len(x._shape))
        return [Meta(x._shape, int_to_long(x.dtype, attrs))]
    return infer


def _scan_kernel(name, fn):
    def kernel(ins, outs, attrs):
        x, out = ins[0], outs[0]
        if x.ndim == 0:
            out[...] = x
            return
        axis = norm_axis(name, attrs["dim"], x.ndim)
        if out.dtype in HALF_DTYPES:  # each output: the float32 running value, rounded
            in_float32(_scan_into, x, out, fn, axis)
        else:
            fn(x, axis=axis, out=out, dtype=out.dtype)
    return kernel


def _scan_into(x: np.ndarray, out: np.ndarray, fn, axis: int) -> None:
    fn(x, axis=axis, out=out, dtype=out.dtype)


cumsum = register("cumsum", doc="Cumulative sum along ``dim``.", amp="deny")
cumsum.infer(_scan_infer("cumsum"))
cumsum.kernel("cpu")(_scan_kernel("cumsum", np.cumsum))
cumsum.sbp(along_dim_rule("cumsum", 1, linear=True))


@cumsum.grad
def _(ctx, dout):
    if not dout._shape:
        return dout
    d = norm_axis("cumsum", ctx.attrs["dim"], len(dout._shape))
    return F.flip(F.cumsum(F.flip(dout, (d,)), d), (d,))


cumprod = register("cumprod", doc="Cumulative product along ``dim``.", amp="deny")
cumprod.infer(_scan_infer("cumprod"))
cumprod.kernel("cpu")(_scan_kernel("cumprod", np.cumprod))
cumprod.sbp(along_dim_rule("cumprod", 1))


@cumprod.grad
def _(ctx, dout):
    return F.call("cumprod_backward", ctx.inputs[0], dout, dim=ctx.attrs["dim"])


cumprod_backward = register(
    "cumprod_backward", amp="deny",
    doc="Gradient of cumprod: dx[k] = sum_{i>=k} g[i] * prod_{j<=i, j!=k} x[j] (exact at 0).")


@cumprod_backward.infer
def _(inputs, attrs):
    x, g = inputs
    if x._shape != g._shape:
        fail("cumprod_backward", "input and gradient shapes differ", x._shape, g._shape)
    return [Meta(x._shape, g.dtype)]


cumprod_backward.sbp(along_dim_rule("cumprod_backward", 1))


@cumprod_backward.kernel("cpu")
def _(ins, outs, attrs):
    if ins[0].ndim == 0:
        outs[0][...] = ins[1]
        return
    d = norm_axis("cumprod_backward", attrs["dim"], ins[0].ndim)
    acc = acc_dtype(outs[0].dtype)
    if acc == outs[0].dtype:
        _cumprod_backward(ins[0], ins[1], outs[0], d)
        return
    out = np.empty(outs[0].shape, acc)  # half precision sums in float32, rounded once
    _cumprod_backward(ins[0].astype(acc), ins[1].astype(acc), out, d)
    with np.errstate(over="ignore"):
        np.copyto(outs[0], out, casting="unsafe")


def _cumprod_backward(x: np.ndarray, g: np.ndarray, out: np.ndarray, d: int) -> None:
    xm, gm, om = np.moveaxis(x, d, 0), np.moveaxis(g, d, 0), np.moveaxis(out, d, 0)
    n = xm.shape[0]
    if n == 0:
        return
    # s[k] = g[k] + x[k+1] * s[k+1]: the sum over i >= k with the factors after k
    s = np.array(gm[n - 1], dtype=out.dtype)
    om[n - 1] = s
    for k in range(n - 2, -1, -1):
        s = gm[k] + xm[k + 1] * s
        om[k] = s
    # times the product of the factors before k
    left = np.ones_like(om[0])
    for k in range(n):
        om[k] *= left
        left = left * xm[k]


@cumprod_backward.grad
def _(ctx, dout):
    raise NotImplementedError("cumprod (and prod): gradients of order two or more are not "
                              "supported")
