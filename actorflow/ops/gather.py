"""Gather-like indexing ops: gather / scatter, index_select, index_add, nonzero and one_hot
(split from ``actorflow/ops/index.py``, which keeps ``x[index]`` / ``x[index] = v``).

Negative indices raise for these ops, as PyTorch does; kernels check the bounds themselves (an
index tensor's values are known only when the kernel runs, in eager mode and in a graph).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, add_at, norm_axis
from actorflow.ops.boxing import B, P, S, Sig
from actorflow.framework.sbp_parallel import broadcast
from actorflow.ops.index import saved_index_inputs
from actorflow.ops.registry import Meta, fail, register

# ---- gather / scatter -------------------------------------------------------------------------

def along_axis(index: np.ndarray, dim: int) -> tuple:
    """The NumPy index that picks ``index[i, j, k]`` along ``dim`` and ``i, j, k`` elsewhere."""
    nd = index.ndim
    return tuple(index if d == dim else
                 np.arange(n).reshape([n if e == d else 1 for e in range(nd)])
                 for d, n in enumerate(index.shape))


def _check_bounds(op_name: str, index: np.ndarray, size: int, dim: int) -> None:
    if index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= size:
            bad = lo if lo < 0 else hi
            raise IndexError(f"{op_name}: index {bad} is out of range for dimension {dim} with "
                             f"size {size}")


def _dims(shape) -> tuple:
    """A shape with a 0-d tensor read as 1-d of size 1 (gather/scatter mix 0-d and 1-d, as in
    PyTorch)."""
    return tuple(shape) or (1,)


def _as1d(a: np.ndarray) -> np.ndarray:
    """A 0-d array as a 1-element 1-d view (writes go through); other arrays unchanged."""
    return a.reshape(1) if a.ndim == 0 else a


def _check_gather_like(op_name: str, x, index, dim: int, other=None) -> int:
    if index.dtype._category != 1:
        fail(op_name, f"index must have an integer dtype, got {index.dtype}", index._shape)
    xs, ixs = _dims(x._shape), _dims(index._shape)
    nd = len(xs)
    if len(ixs) != nd:
        fail(op_name, "index must have as many dims as the input", x._shape, index._shape)
    dim = norm_axis(op_name, dim, nd)
    for d, (n, m) in enumerate(zip(ixs, xs)):
        if d != dim and n > m:
            fail(op_name, f"index size {n} exceeds the input size {m} at dim {d}",
                 x._shape, index._shape)
    if other is not None:
        os_ = _dims(other._shape)
        if len(os_) != nd or any(n > m for n, m in zip(ixs, os_)):
            fail(op_name, "src must have as many dims as index and be at least as large",
                 x._shape, index._shape, other._shape)
    return dim


gather = register("gather", doc="out[i][j] = x[index[i][j]][j] (for dim=0).")


@gather.infer
def _(inputs, attrs):
    x, index = inputs
    _check_gather_like("gather", x, index, attrs["dim"])
    return [Meta(index._shape, x.dtype)]


@gather.kernel("cpu")
def _(ins, outs, attrs):
    x, index = _as1d(ins[0]), _as1d(ins[1])
    dim = attrs["dim"] % x.ndim
    _check_bounds("gather", index, x.shape[dim], dim)
    _as1d(outs[0])[...] = x[along_axis(index, dim)]


@gather.sbp
def _(inputs, attrs):
    """OneFlow's dim_gather: x and index split alike on a dim other than ``dim`` where they
    have one size; index split on ``dim`` itself with x broadcast (each rank picks its rows
    from all of x); x partial with index broadcast (gathering is linear in x)."""
    xs, ixs = _dims(inputs[0]._shape), _dims(inputs[1]._shape)
    if not inputs[0]._shape or not inputs[1]._shape:
        return
    dim = norm_axis("gather", attrs["dim"], len(xs))
    for d in range(len(xs)):
        if d == dim:
            yield Sig((B, S(d)), (S(d),))
        elif xs[d] == ixs[d]:
            yield Sig((S(d), S(d)), (S(d),))
    yield Sig((P, B), (P,))


@gather.grad
def _(ctx, dout):
    (shape, d), index = ctx.input_metas[0], saved_index_inputs(ctx, 1)[0]
    return F.scatter_add(_zeros_like_grad(shape, d, dout), ctx.attrs["dim"], index, dout), None


def _zeros_like_grad(shape: tuple, dtype, dout):
    """Zeros of the input's ``shape`` to accumulate a gradient into: broadcast on ``dout``'s
    placement when it is global (a local constant there), local otherwise."""
    if dout.is_global:
        return F.zeros(shape, dtype=dtype, placement=dout.placement,
                       sbp=(broadcast,) * len(dout.sbp))
    return F.zeros(shape, dtype=dtype)


scatter = register("scatter", doc="x with src (or the attr value) written at index along dim; "
                                  "reduce None (assign), 'add' or 'multiply' (accumulate).")


@scatter.infer
def _(inputs, attrs):
    x, index = inputs[0], inputs[1]
    src = inputs[2] if len(inputs) > 2 else None
    if attrs.get("reduce") not in (None, "add", "multiply"):
        fail("scatter", f"reduce must be None, 'add' or 'multiply', got {attrs.get('reduce')!r}")
    if src is None and attrs.get("value") is None:
        fail("scatter", "needs a src tensor or a value")
    _check_gather_like("scatter", x, index, attrs["dim"], src)
    return [Meta(x._shape, x.dtype)]


@scatter.kernel("cpu")
def _(ins, outs, attrs):
    x, index, out = ins[0], _as1d(ins[1]), outs[0]
    if out is not x:
        out[...] = x
    out = _as1d(out)
    dim = attrs["dim"] % out.ndim
    _check_bounds("scatter", index, out.shape[dim], dim)
    full = along_axis(index, dim)
    if len(ins) > 2:
        vals = _as1d(ins[2])[tuple(slice(0, n) for n in index.shape)]
    else:
        vals = np.asarray(attrs["value"]).astype(out.dtype)
    if index.size == 0:
        return
    if attrs.get("reduce") == "add":
        add_at(out, full, vals.astype(out.dtype))
    elif attrs.get("reduce") == "multiply":
        np.multiply.at(out, full, vals.astype(out.dtype))
    else:
        out[full] = vals


@scatter.sbp
def _(inputs, attrs):
    """Split on a dim other than ``dim`` where x, index (and src) have one size: each rank
    scatters its rows (OneFlow's rule); for reduce='add' also partial sums (below)."""
    shapes = [tuple(t._shape) for t in inputs]
    if any(len(s) != len(shapes[0]) for s in shapes):
        return
    dim = attrs["dim"] % max(len(shapes[0]), 1)
    for d in range(len(shapes[0])):
        if d != dim and all(s[d] == shapes[0][d] for s in shapes):
            yield Sig((S(d),) * len(inputs), (S(d),))
    if attrs.get("reduce") == "add" and len(inputs) == 3 and shapes[0]:
        # adding is linear: each rank adds its share of index and src (split alike along
        # dim) into its part of a partial x, or all of a partial src into a partial x
        if shapes[1][dim] == shapes[2][dim]:
            yield Sig((P, S(dim), S(dim)), (P,))
        yield Sig((P, B, P), (P,))


@scatter.grad
def _(ctx, dout):
    if ctx.attrs.get("reduce") == "multiply":
        raise NotImplementedError("scatter: the gradient of reduce='multiply' is not supported "
                                  "(as in PyTorch)")
    saved = saved_index_inputs(ctx, 1)
    index, dim = saved[0], ctx.attrs["dim"]
    add = ctx.attrs.get("reduce") == "add"
    dx = dsrc = None
    if ctx.needs_input_grad[0]:
        dx = dout if add else F.scatter(dout, dim, index, 0)
    if len(saved) > 1 and ctx.needs_input_grad[2]:
        dsrc = F.gather(dout, dim, index)
        src_shape = tuple(ctx.input_metas[2][0])
        if _dims(index._shape) == _dims(src_shape):
            if tuple(index._shape) != src_shape:
                dsrc = F.reshape(dsrc, src_shape)
        else:  # src is larger than index: its gradient is 0 outside the index's corner
            if not index._shape:
                dsrc = F.reshape(dsrc, (1,))
            corner = tuple(("slice", 0, n, None) for n in _dims(index._shape))
            dsrc = F.getitem_backward(dsrc, corner, (), src_shape)
    return (dx, None, dsrc) if len(saved) > 1 else (dx, None)


# ---- index_select -----------------------------------------------------------------------------

index_select = register("index_select", doc="The slices of x at the 1-d ``index`` along ``dim``; "
                                            "indices must lie in [0, size) (PyTorch's rule: "
                                            "negative ones are out of range, not wrapped).")


@index_select.infer
def _(inputs, attrs):
    x, index = inputs
    if index.dtype._category != 1 or len(index._shape) != 1:
        fail("index_select", f"index must be a 1-d integer tensor, got {index.dtype}",
             x._shape, index._shape)
    if not x._shape:
        fail("index_select", "the input must have at least one dim", x._shape)
    d = norm_axis("index_select", attrs["dim"], len(x._shape))
    return [Meta(x._shape[:d] + (index._shape[0],) + x._shape[d + 1:], x.dtype)]


@index_select.kernel("cpu")
def _(ins, outs, attrs):
    x, index = ins
    d = attrs["dim"] % x.ndim
    _check_bounds("index_select", index, x.shape[d], d)
    np.take(x, index, axis=d, out=outs[0], mode="clip")  # in range: "clip" only skips a buffer


@index_select.sbp
def _(inputs, attrs):
    """OneFlow's gather: x split on a dim other than ``dim`` with index broadcast; index
    split with x broadcast (the selected slices split along ``dim``); x partial with index
    broadcast."""
    nd = len(inputs[0]._shape)
    dim = norm_axis("index_select", attrs["dim"], nd)
    for d in range(nd):
        if d != dim:
            yield Sig((S(d), B), (S(d),))
    yield Sig((B, S(0)), (S(dim),))
    yield Sig((P, B), (P,))


@index_select.grad
def _(ctx, dout):
    index = saved_index_inputs(ctx, 1)[0]
    shape, dtype = ctx.input_metas[0]
    return F.index_add(_zeros_like_grad(shape, dtype, dout), ctx.attrs["dim"], index,
                       dout), None


# ---- index_add --------------------------------------------------------------------------------

index_add = register("index_add", doc="x with alpha * source added at index along dim "
                                      "(duplicates accumulate).")


@index_add.infer
def _(inputs, attrs):
    x, index, src = inputs
    if index.dtype._category != 1 or len(index._shape) > 1:
        fail("index_add", f"index must be a 0-d or 1-d integer tensor, got {index.dtype}",
             index._shape)
    if not x._shape:
        fail("index_add", "the input must have at least one dim", x._shape)
    dim = norm_axis("index_add", attrs["dim"], len(x._shape))
    n = index._shape[0] if index._shape else 1
    want = tuple(n if d == dim else s for d, s in enumerate(x._shape))
    if tuple(src._shape) != want and not (not index._shape and
                                          tuple(src._shape) == want[:dim] + want[dim + 1:]):
        fail("index_add", f"source must have shape {want}", x._shape, index._shape, src._shape)
    return [Meta(x._shape, x.dtype)]


@index_add.kernel("cpu")
def _(ins, outs, attrs):
    x, index, src = ins
    out = outs[0]
    if out is not x:
        out[...] = x
    dim = attrs["dim"] % x.ndim
    _check_bounds("index_add", index, x.shape[dim], dim)
    src = np.asarray(src * attrs["alpha"]).astype(out.dtype)
    if index.ndim == 0:
        src = np.expand_dims(src, dim) if src.ndim < x.ndim else src
    where = (slice(None),) * dim + (index.reshape(-1),)
    add_at(out, where, src)


@index_add.sbp
def _(inputs, attrs):
    """x and source split alike on a dim other than ``dim`` (source's dims as x's when index
    is 1-d), index broadcast; x partial with index and source split along the selected
    entries (each rank adds its share), or with index broadcast and source partial (linear)."""
    nd = len(inputs[0]._shape)
    dim = norm_axis("index_add", attrs["dim"], nd)
    if len(inputs[1]._shape) == 1:
        for d in range(nd):
            if d != dim:
                yield Sig((S(d), B, S(d)), (S(d),))
        yield Sig((P, S(0), S(dim)), (P,))
    yield Sig((P, B, P), (P,))


@index_add.grad
def _(ctx, dout):
    index = saved_index_inputs(ctx, 1)[0]
    dsrc = None
    if ctx.needs_input_grad[2]:
        dsrc = F.index_select(dout, ctx.attrs["dim"], index)
        if ctx.attrs["alpha"] != 1:
            dsrc = F.mul(dsrc, ctx.attrs["alpha"])
        dsrc = F.reshape(dsrc, ctx.input_metas[2][0])
    return dout, None, dsrc


# ---- nonzero ----------------------------------------------------------------------------------

nonzero = register("nonzero", doc="Coordinates of the nonzero elements, shape (n, ndim). Its "
                                  "output shape depends on the input's values.")


@nonzero.infer
def _(inputs, attrs):
    x = inputs[0]
    if x.is_lazy:
        fail("nonzero", "the output shape depends on the input's values, which a traced graph "
             "does not know", x._shape)
    n = int(np.count_nonzero(x._array()))
    return [Meta((n, len(x._shape)), attrs.get("dtype") or dt.int64)]


@nonzero.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.argwhere(ins[0])


# ---- one_hot ----------------------------------------------------------------------------------

one_hot = register("one_hot", doc="out[..., c] = on_value where x[...] == c, else off_value "
                                  "(shape x.shape + (num_classes,)); no gradient.")


@one_hot.infer
def _(inputs, attrs):
    x, n = inputs[0], attrs["num_classes"]
    if x.dtype._category != 1:
        fail("one_hot", f"expected an integer (index) tensor, got {x.dtype}", x._shape)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        fail("one_hot", f"num_classes must be a non-negative int, got {n!r}", x._shape)
    return [Meta(tuple(x._shape) + (n,), attrs.get("dtype") or dt.int64)]


@one_hot.sbp
def _(inputs, attrs):
    """Indices split on dim k give the one-hot rows split on dim k (OneFlow's one_hot)."""
    for d in range(len(inputs[0]._shape)):
        yield Sig((S(d),), (S(d),))


@one_hot.kernel("cpu")
def _(ins, outs, attrs):
    x, out, n = ins[0], outs[0], attrs["num_classes"]
    if x.size:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0:
            raise ValueError(f"one_hot: class values must be non-negative, got {lo} (input "
                             f"shape {x.shape})")
        if hi >= n:
            raise ValueError(f"one_hot: class values must be smaller than num_classes={n}, "
                             f"got {hi} (input shape {x.shape})")
    out.fill(attrs.get("off_value", 0))
    if x.size:
        np.put_along_axis(out, x[..., None].astype(np.intp, copy=False), attrs.get("on_value", 1),
                          axis=-1)
