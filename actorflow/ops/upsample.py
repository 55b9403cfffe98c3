"""Resampling of (N, C, *spatial) inputs along their 1-3 spatial dims: ``upsample`` (nearest,
nearest-exact, linear, cubic; ``F.interpolate`` and ``nn.Upsample``) and its adjoint
``upsample_grad``.

Every mode is separable: output position ``o`` of a spatial dim reads a few input positions
(the taps: 1 for nearest, 2 for linear, 4 for cubic) with fixed weights, so the op resamples
one dim after the other. A dim's taps are an (out, T) index array and an (out, T) weight array
(PyTorch's and OneFlow's source-index arithmetic, in the accumulation dtype: float32, float64
for float64 data); the forward pass is T ``take``s along the dim, the adjoint sums each
output's weighted gradient into its taps with one ``add.reduceat`` over the taps sorted by
position. Both ops are linear in their input: the gradient of one is the other.

Attrs: ``mode``, ``output_size`` (the spatial output sizes), ``scales`` (per dim, the
user's scale factor or None: with one, the source index is ``dst / scale`` rather than
``dst * in / out``), ``align_corners``; ``upsample_grad`` has ``input_shape`` as well.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, HALF_DTYPES, is_floating
from actorflow.ops.boxing import P, S, Sig, shard_shape
from actorflow.ops.registry import Meta, fail, register

MODES = ("nearest", "nearest-exact", "linear", "cubic")
_A = -0.75  # the cubic convolution coefficient of PyTorch and OneFlow


def _scale(in_size: int, out_size: int, scale, align_corners: bool, acc) -> np.ndarray:
    """The step in input positions per output position (``area_pixel_compute_scale``)."""
    if align_corners:
        return acc((in_size - 1) / (out_size - 1)) if out_size > 1 else acc(0)
    if scale is not None and scale > 0:
        return acc(1.0 / scale)
    return acc(in_size) / acc(out_size)


def _cubic(t: np.ndarray) -> list:
    """The four cubic-convolution weights of the taps at -1, 0, 1, 2 for fractions ``t``."""
    a = _A
    t1, u, u1 = t + 1, 1 - t, 2 - t
    return [((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * u - (a + 3)) * u * u + 1,
            ((a * u1 - 5 * a) * u1 + 8 * a) * u1 - 4 * a]


def taps(mode: str, in_size: int, out_size: int, scale, align_corners: bool, acc):
    """``(index, weight)`` of one spatial dim: (out, T) int64 input positions and their (out,
    T) weights in dtype ``acc`` (None for the nearest modes, whose weight is 1)."""
    last = in_size - 1
    if mode in ("nearest", "nearest-exact"):
        # PyTorch computes nearest indices in float32 whatever the data's dtype
        step = _scale(in_size, out_size, scale, False, np.float32)
        o = np.arange(out_size, dtype=np.float32)
        if mode == "nearest-exact":
            o = o + np.float32(0.5)
        idx = np.minimum(np.floor(o * step).astype(np.int64), last)
        return idx[:, None], None
    step = _scale(in_size, out_size, scale, align_corners, acc)
    o = np.arange(out_size, dtype=acc)
    src = step * o if align_corners else step * (o + acc(0.5)) - acc(0.5)
    if mode == "linear":
        src = np.maximum(src, acc(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), last)
        lam = (src - i0.astype(acc)).astype(acc)
        idx = np.stack([i0, np.minimum(i0 + 1, last)], axis=1)
        return idx, np.stack([acc(1) - lam, lam], axis=1).astype(acc)
    base = np.floor(src)
    t = (src - base).astype(acc)
    base = base.astype(np.int64)
    idx = np.clip(base[:, None] + np.arange(-1, 3), 0, last)
    return idx, np.stack(_cubic(t), axis=1).astype(acc)


def _axis_taps(attrs: dict, in_sizes: tuple, acc) -> list:
    scales = attrs.get("scales") or (None,) * len(in_sizes)
    return [taps(attrs["mode"], n, o, s, attrs["align_corners"], acc)
            for n, o, s in zip(in_sizes, attrs["output_size"], scales)]


def _resample(x: np.ndarray, axis: int, idx: np.ndarray, w) -> np.ndarray:
    """``x`` resampled along ``axis`` at the taps ``idx`` with weights ``w``."""
    if w is None:
        return np.take(x, idx[:, 0], axis=axis)
    shape = [1] * x.ndim
    shape[axis] = idx.shape[0]
    res = np.take(x, idx[:, 0], axis=axis)
    res *= w[:, 0].reshape(shape)
    for t in range(1, idx.shape[1]):
        term = np.take(x, idx[:, t], axis=axis)
        term *= w[:, t].reshape(shape)
        res += term
    return res


_DENSE_MAX = 512  # the adjoint of a dim up to this long is one matmul with its dense matrix


def _adjoint(g: np.ndarray, axis: int, idx: np.ndarray, w, in_size: int) -> np.ndarray:
    """The adjoint of ``_resample``: each output's gradient, times its weights, summed into
    its taps along ``axis`` (a dim of ``in_size`` positions). Short dims multiply by the
    dim's (out, in) interpolation matrix (BLAS: ~15x faster than the scatter at 64 -> 128);
    longer ones, where that matrix is mostly zeros, sum with ``add.reduceat``."""
    moved = np.moveaxis(g, axis, -1)
    if in_size <= _DENSE_MAX:
        out = idx.shape[0]
        mat = np.zeros((out, in_size), g.dtype)
        rows = np.broadcast_to(np.arange(out)[:, None], idx.shape)
        np.add.at(mat, (rows, idx), 1 if w is None else w)
        return np.moveaxis(moved @ mat, -1, axis)
    lead, out = moved.shape[:-1], moved.shape[-1]
    m = int(np.prod(lead))
    res = np.zeros((m, in_size), g.dtype)
    if m:
        rows = moved.reshape(m, out)
        contrib = rows if w is None else (rows[:, :, None] * w[None]).reshape(m, -1)
        flat = idx.reshape(-1)
        order = np.argsort(flat, kind="stable")
        positions, starts = np.unique(flat[order], return_index=True)
        res[:, positions] = np.add.reduceat(contrib[:, order], starts, axis=1)
    return np.moveaxis(res.reshape(lead + (in_size,)), -1, axis)


def _acc(d: np.dtype):
    return np.float64 if d == np.float64 else np.float32


def _work(x: np.ndarray, mode: str) -> np.ndarray:
    """``x`` in the dtype the kernel computes in (half precision in float32)."""
    if mode.startswith("nearest") or x.dtype not in HALF_DTYPES:
        return x
    return x.astype(np.float32)


def _check(name: str, x: Meta, attrs: dict, in_sizes) -> None:
    n = len(attrs["output_size"])
    mode = attrs["mode"]
    if mode not in MODES:
        fail(name, f"mode must be one of {MODES}, got {mode!r}", x.shape)
    if len(x.shape) != n + 2:
        fail(name, f"expected a {n + 2}-d input (batch, channels, {n} spatial dims) for "
                   f"output_size {tuple(attrs['output_size'])}", x.shape)
    if any(s <= 0 for s in attrs["output_size"]):
        fail(name, f"output sizes must be positive, got {tuple(attrs['output_size'])}", x.shape)
    if any(s <= 0 for s in in_sizes):
        fail(name, "the input's spatial dims must be non-empty", x.shape)
    scales = attrs.get("scales")
    if scales is not None and len(scales) != n:
        fail(name, f"scales needs {n} values (or None), got {tuple(scales)}", x.shape)
    if not mode.startswith("nearest") and not is_floating(x.dtype.np):
        fail(name, f"mode {mode!r} needs a floating-point input, got {x.dtype}", x.shape)


upsample = register(
    "upsample",
    doc="Resample (N, C, *spatial) along its 1-3 spatial dims to attr output_size: mode "
        "nearest / nearest-exact (floor of the scaled index), linear (2 taps per dim: linear, "
        "bilinear, trilinear) or cubic (4 taps, A = -0.75: bicubic); attrs scales (the user's "
        "scale factors or None) and align_corners as in PyTorch.")
upsample_grad = register(
    "upsample_grad",
    doc="Adjoint of upsample (input dout): each output gradient summed into the input "
        "positions it was read from, with its weights; attr input_shape.")


@upsample.infer
def _(inputs, attrs):
    x = inputs[0]
    _check("upsample", x, attrs, x._shape[2:])
    return [Meta(tuple(x._shape[:2]) + tuple(attrs["output_size"]), x.dtype)]


@upsample.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    acc = _acc(x.dtype)
    res = _work(x, attrs["mode"])
    for k, (idx, w) in reversed(list(enumerate(_axis_taps(attrs, x.shape[2:], acc)))):
        res = _resample(res, 2 + k, idx, w)
    np.copyto(out, res, casting="unsafe")


@upsample.grad
def _(ctx, dout):
    return F.upsample_grad(dout, ctx.input_metas[0][0], ctx.attrs)


@upsample_grad.infer
def _(inputs, attrs):
    g = inputs[0]
    shape = tuple(attrs["input_shape"])
    _check("upsample_grad", Meta(shape, g.dtype), attrs, shape[2:])
    want = shape[:2] + tuple(attrs["output_size"])
    if tuple(g._shape) != want:
        fail("upsample_grad", f"dout must have the output's shape {want}", g._shape)
    return [Meta(shape, g.dtype)]


@upsample_grad.kernel("cpu")
def _(ins, outs, attrs):
    g, out = ins[0], outs[0]
    in_sizes = tuple(attrs["input_shape"])[2:]
    res = g.astype(np.float32) if g.dtype in HALF_DTYPES else g
    for k, (idx, w) in enumerate(_axis_taps(attrs, in_sizes, _acc(g.dtype))):
        res = _adjoint(res, 2 + k, idx, w, in_sizes[k])
    np.copyto(out, res, casting="unsafe")


@upsample_grad.grad
def _(ctx, ddx):
    attrs = {k: v for k, v in ctx.attrs.items() if k != "input_shape"}
    return F.upsample_nd(ddx, attrs)


def _plane_rule(sized: bool):
    """Split on the batch or the channel dim alike, or partial sums in and out (the op is
    linear in its input)."""
    def rule(inputs, attrs):
        for d in (0, 1):
            local = None
            if sized:
                def local(attrs, index, n, d=d):
                    return dict(attrs, input_shape=shard_shape(tuple(attrs["input_shape"]),
                                                               S(d), n, index))
            yield Sig((S(d),), (S(d),), None, local)
        yield Sig((P,), (P,))
    return rule


upsample.sbp(_plane_rule(False))
upsample_grad.sbp(_plane_rule(True))
