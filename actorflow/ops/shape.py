"""Shape ops: reshape/view, transpose/permute, narrow, cat/split, repeat (views where possible).

squeeze, unsqueeze, flatten and unflatten are reshapes (``functional.shape``); flip, roll,
tril/triu and pad live in ``rearrange``.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, copy_reshaped, norm_axis
from actorflow.ops.boxing import P, S, Sig, shard_shape
from actorflow.ops.index import write_into
from actorflow.ops.registry import Meta, fail, register


def infer_reshape(op_name: str, shape: tuple, target) -> tuple:
    """Resolve a target shape with at most one -1 against ``shape``."""
    target = tuple(int(s) for s in target)
    numel = 1
    for s in shape:
        numel *= s
    if target.count(-1) > 1:
        raise ValueError(f"only one dimension can be inferred, got {target}")
    known = 1
    for s in target:
        if s != -1:
            if s < 0:
                raise ValueError(f"invalid shape dimension {s} in {target}")
            known *= s
    if -1 in target:
        if known == 0 or numel % known:
            raise ValueError(f"shape {target} is invalid for input of size {numel}")
        target = tuple(numel // known if s == -1 else s for s in target)
    elif known != numel:
        raise ValueError(f"shape {target} is invalid for input of size {numel}")
    return target


def view_strides(shape: tuple, strides: tuple, new_shape: tuple) -> tuple | None:
    """Strides (in elements) under which memory laid out as ``shape`` / ``strides`` reads as
    ``new_shape`` without a copy, or None when there are none (PyTorch's rule for ``view``).

    The old dims fall into chunks of dims that are contiguous with one another (a dim's stride
    is the next one's stride times its size; size-1 dims join any chunk). A view exists when
    the new dims, read from the last, can be grouped into runs whose sizes multiply to each
    chunk's size in turn; each run takes strides from its chunk's innermost stride."""
    new_shape = tuple(new_shape)
    numel = 1
    for n in shape:
        numel *= n
    if numel == 0 or not shape:  # no memory to lay out, or one element: anything fits
        out, acc = [], 1
        for n in reversed(new_shape):
            out.insert(0, acc)
            acc *= max(n, 1)
        return tuple(out)
    out = [0] * len(new_shape)
    j = len(new_shape) - 1
    step = strides[-1]  # innermost stride of the chunk being matched
    chunk = run = 1     # elements in the chunk so far / in the run of new dims matched to it
    for d in range(len(shape) - 1, -1, -1):
        chunk *= shape[d]
        if d > 0 and (shape[d - 1] == 1 or strides[d - 1] == chunk * step):
            continue  # dim d - 1 continues the chunk
        while j >= 0 and (run < chunk or new_shape[j] == 1):
            out[j] = run * step
            run *= new_shape[j]
            j -= 1
        if run != chunk:
            return None
        if d > 0:
            step, chunk, run = strides[d - 1], 1, 1
    return tuple(out) if j == -1 else None


reshape = register("reshape", is_identity=lambda attrs: True,
                   doc="Same values in a new shape (a view when the input allows).")


@reshape.infer
def _(inputs, attrs):
    x = inputs[0]
    return [Meta(infer_reshape("reshape", x._shape, attrs["shape"]), x.dtype)]


def _groups_into(dims: tuple, start: int, size: int) -> bool:
    """Whether ``dims[start:e]`` multiply to ``size`` for some ``e``."""
    prod = 1
    for k in range(start, len(dims)):
        prod *= dims[k]
        if prod == size:
            return True
        if prod > size:
            return False
    return False


def _split_follows(shape: tuple, d: int, new: tuple, d2: int, n: int) -> bool:
    """Whether split(d) of ``shape`` over ``n`` ranks is split(d2) of ``new``: the same size,
    or dim ``d`` cut into ``new[d2:e]`` (heads from features) with ``new[d2]`` a multiple of
    ``n``, or ``shape[d:e]`` merged into ``new[d2]`` with ``shape[d]`` a multiple of ``n``."""
    if new[d2] == shape[d]:
        return True
    if new[d2] < shape[d]:
        return new[d2] % n == 0 and _groups_into(new, d2, shape[d])
    return shape[d] % n == 0 and _groups_into(shape, d, new[d2])


@reshape.sbp
def _(inputs, attrs):
    """A split dim that the new shape keeps (same size, same number of elements before it)
    stays split, as does one cut into several dims or merged with the dims after it when each
    rank's shard is whole rows of the split dim (even splits); the shards are reshaped to
    their part of the new shape."""
    shape = tuple(inputs[0]._shape)
    new = infer_reshape("reshape", shape, attrs["shape"])
    n = len(inputs[0].placement.flat_ranks)
    for d in range(len(shape)):
        lead = int(np.prod(shape[:d], dtype=np.int64))
        for d2 in range(len(new)):
            if (int(np.prod(new[:d2], dtype=np.int64)) == lead
                    and _split_follows(shape, d, new, d2, n)):
                def local(attrs, index, n, d2=d2):
                    return dict(attrs, shape=shard_shape(new, S(d2), n, index))
                yield Sig((S(d),), (S(d2),), None, local)
                break
    yield Sig((P,), (P,), None, lambda attrs, index, n: dict(attrs, shape=new))


@reshape.view
def _(ins, attrs):
    # never a copy: ValueError where ``x``'s strides can't express the shape (eager mode then
    # runs the kernel; ``job.views.aliasing_views``)
    x = ins[0]
    shape = infer_reshape("reshape", x.shape, attrs["shape"])
    try:
        return [x.reshape(shape, copy=False)]
    except TypeError:  # NumPy < 2.1 has no copy=: the callers check that the result aliases
        return [x.reshape(shape)]


@reshape.view_write
def _(base, view, attrs, idx):
    return F.reshape(view, tuple(base._shape))


@reshape.kernel("cpu")
def _(ins, outs, attrs):
    copy_reshaped(ins[0], outs[0])


@reshape.grad
def _(ctx, dout):
    return F.reshape(dout, ctx.input_metas[0][0])


def _permuted(shape, perm):
    return tuple(shape[p] for p in perm)


def _identity_perm(attrs: dict) -> bool:
    perm = attrs.get("perm")
    return perm is not None and list(perm) == list(range(len(perm)))


transpose = register("transpose", is_identity=_identity_perm,
                     doc="Permute dimensions (``perm`` attr); a view in eager.")


@transpose.infer
def _(inputs, attrs):
    x = inputs[0]
    perm = attrs["perm"]
    if sorted(perm) != list(range(len(x._shape))):
        raise ValueError(f"permutation {tuple(perm)} does not match {len(x._shape)} dims")
    return [Meta(_permuted(x._shape, perm), x.dtype)]


@transpose.sbp
def _(inputs, attrs):
    """The split dim follows the permutation; partial sums stay partial."""
    perm = list(attrs["perm"])
    for d in range(len(perm)):
        yield Sig((S(d),), (S(perm.index(d)),))
    yield Sig((P,), (P,))


@transpose.view
def _(ins, attrs):
    return [np.transpose(ins[0], attrs["perm"])]


@transpose.view_write
def _(base, view, attrs, idx):
    return F.permute(view, [int(i) for i in np.argsort(attrs["perm"])])


@transpose.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = np.transpose(ins[0], attrs["perm"])


@transpose.grad
def _(ctx, dout):
    perm = ctx.attrs["perm"]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return F.permute(dout, inv)


def perm_swapping(ndim: int, d0: int, d1: int) -> list:
    perm = list(range(ndim))
    a, b = norm_axis("transpose", d0, ndim), norm_axis("transpose", d1, ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return perm


# ---- narrow: a slice along one dim ---------------------------------------------------------------

def _slicer(d: int, start: int, stop: int) -> tuple:
    return (slice(None),) * d + (slice(start, stop),)


narrow = register("narrow", doc="``length`` entries of ``dim`` from ``start``; a view in eager.")


@narrow.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x._shape:
        fail("narrow", "cannot narrow a 0-d tensor", x._shape)
    d = norm_axis("narrow", attrs["dim"], len(x._shape))
    start, length = attrs["start"], attrs["length"]
    size = x._shape[d]
    if not 0 <= start <= size or length < 0 or start + length > size:
        fail("narrow", f"start ({start}) + length ({length}) exceeds the size {size} of dim {d}",
             x._shape)
    return [Meta(x._shape[:d] + (length,) + x._shape[d + 1:], x.dtype)]


def _narrowed(x: np.ndarray, attrs: dict) -> np.ndarray:
    d = norm_axis("narrow", attrs["dim"], x.ndim)
    return x[_slicer(d, attrs["start"], attrs["start"] + attrs["length"])]


@narrow.sbp
def _(inputs, attrs):
    """Any dim but the narrowed one split (or partial sums): the same layout."""
    nd = len(inputs[0]._shape)
    yield from _other_dims_split(nd, norm_axis("narrow", attrs["dim"], nd), 1, 1)


def _other_dims_split(nd: int, dim: int, n_in: int, n_out: int):
    """Signatures of ops that work along ``dim`` only (narrow, cat, split): every input and
    output split alike on any other dim, or all partial sums (the ops are linear)."""
    for d in range(nd):
        if d != dim:
            yield Sig((S(d),) * n_in, (S(d),) * n_out)
    yield Sig((P,) * n_in, (P,) * n_out)


@narrow.view
def _(ins, attrs):
    return [_narrowed(ins[0], attrs)]


def _dim_slice(base, dim: int, start: int, stop: int) -> tuple:
    """The index spec (getitem's attr) of ``start:stop`` along ``dim`` of ``base``."""
    d = norm_axis("view_write", dim, len(base._shape))
    return (("slice", None, None, None),) * d + (("slice", start, stop, None),)


@narrow.view_write
def _(base, view, attrs, idx):
    start = attrs["start"]
    return write_into(base, _dim_slice(base, attrs["dim"], start, start + attrs["length"]),
                      view)


@narrow.kernel("cpu")
def _(ins, outs, attrs):
    outs[0][...] = _narrowed(ins[0], attrs)


@narrow.grad
def _(ctx, dout):
    shape = ctx.input_metas[0][0]
    d = norm_axis("narrow", ctx.attrs["dim"], len(shape))
    start = ctx.attrs["start"]
    pads = [0, 0] * (len(shape) - 1 - d)
    pads += [start, shape[d] - start - ctx.attrs["length"]]
    return F.pad(dout, tuple(pads))


# ---- cat / split ---------------------------------------------------------------------------------

cat = register("cat", doc="Concatenate tensors along ``dim`` (dtypes promote).")


@cat.infer
def _(inputs, attrs):
    if not inputs:
        raise ValueError("expected a non-empty sequence of tensors")
    first = inputs[0]._shape
    shapes = [t._shape for t in inputs]
    if not first:
        fail("cat", "zero-dimensional tensors cannot be concatenated", *shapes)
    d = norm_axis("cat", attrs["dim"], len(first))
    total = 0
    for i, s in enumerate(shapes):
        if len(s) != len(first) or s[:d] != first[:d] or s[d + 1:] != first[d + 1:]:
            fail("cat", f"sizes of tensors must match except in dimension {d}; tensor {i} "
                 "differs", *shapes)
        total += s[d]
    dtype = inputs[0].dtype
    for t in inputs[1:]:
        dtype = dt.promote_types(dtype, t.dtype)
    return [Meta(first[:d] + (total,) + first[d + 1:], dtype)]


@cat.sbp
def _(inputs, attrs):
    """Every input split on a dim other than the cat dim (or partial): the result alike."""
    if not inputs[0]._shape:
        return
    nd = len(inputs[0]._shape)
    yield from _other_dims_split(nd, norm_axis("cat", attrs["dim"], nd), len(inputs), 1)


@cat.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    np.concatenate(ins, axis=norm_axis("cat", attrs["dim"], out.ndim), out=out, casting="unsafe")


@cat.grad
def _(ctx, dout):
    d = norm_axis("cat", ctx.attrs["dim"], len(dout._shape))
    sizes = [m[0][d] for m in ctx.input_metas]
    parts = F.split(dout, sizes, d)
    return tuple(parts)


split = register("split", doc="Split ``dim`` into pieces of the given ``sizes``; views in eager.")


@split.infer
def _(inputs, attrs):
    x = inputs[0]
    if not x._shape:
        fail("split", "cannot split a 0-d tensor", x._shape)
    d = norm_axis("split", attrs["dim"], len(x._shape))
    sizes = attrs["sizes"]
    if any(s < 0 for s in sizes) or sum(sizes) != x._shape[d]:
        fail("split", f"split sizes {tuple(sizes)} must be non-negative and sum to the size "
             f"{x._shape[d]} of dim {d}", x._shape)
    return [Meta(x._shape[:d] + (s,) + x._shape[d + 1:], x.dtype) for s in sizes]


def _pieces(x: np.ndarray, attrs: dict) -> list:
    d = norm_axis("split", attrs["dim"], x.ndim)
    res, start = [], 0
    for s in attrs["sizes"]:
        res.append(x[_slicer(d, start, start + s)])
        start += s
    return res


@split.sbp
def _(inputs, attrs):
    """Any dim but the split one split (or partial): every piece alike."""
    nd = len(inputs[0]._shape)
    if nd:
        yield from _other_dims_split(nd, norm_axis("split", attrs["dim"], nd), 1,
                                     len(attrs["sizes"]))


@split.view
def _(ins, attrs):
    return _pieces(ins[0], attrs)


@split.view_write
def _(base, view, attrs, idx):
    start = sum(attrs["sizes"][:idx])
    return write_into(base, _dim_slice(base, attrs["dim"], start, start + attrs["sizes"][idx]),
                      view)


@split.kernel("cpu")
def _(ins, outs, attrs):
    for o, piece in zip(outs, _pieces(ins[0], attrs)):
        o[...] = piece


@split.grad
def _(ctx, *douts):
    given = next(g for g in douts if g is not None)
    # zeros for the unused pieces, global (laid out as a given gradient) where they are
    where = {"placement": given.placement, "sbp": given.sbp} if given.is_global else {}
    parts = [g if g is not None else F.zeros(m[0], dtype=given.dtype, **where)
             for g, m in zip(douts, ctx.output_metas)]
    return F.cat(parts, ctx.attrs["dim"])


# ---- repeat --------------------------------------------------------------------------------------

repeat = register("repeat", doc="Tile the tensor ``repeats`` times along each dim.")


@repeat.infer
def _(inputs, attrs):
    x = inputs[0]
    reps = tuple(attrs["repeats"])
    if len(reps) < len(x._shape):
        fail("repeat", f"number of repeat dims ({len(reps)}) can not be smaller than the number "
             f"of dims of the tensor ({len(x._shape)})", x._shape)
    if any(r < 0 for r in reps):
        fail("repeat", f"repeats must be non-negative, got {reps}", x._shape)
    padded = (1,) * (len(reps) - len(x._shape)) + tuple(x._shape)
    return [Meta(tuple(s * r for s, r in zip(padded, reps)), x.dtype)]


@repeat.kernel("cpu")
def _(ins, outs, attrs):
    x, out = ins[0], outs[0]
    reps = tuple(attrs["repeats"])
    out[...] = np.tile(x.reshape((1,) * (len(reps) - x.ndim) + x.shape), reps)


@repeat.sbp
def _(inputs, attrs):
    """A split dim repeated once stays split (renumbered after the new leading dims); partial
    stays partial (OneFlow builds repeat from expand and reshape)."""
    xs, reps = tuple(inputs[0]._shape), tuple(attrs["repeats"])
    lead = len(reps) - len(xs)
    for d in range(len(xs)):
        if reps[lead + d] == 1:
            yield Sig((S(d),), (S(lead + d),))
    yield Sig((P,), (P,))


@repeat.grad
def _(ctx, dout):
    shape = ctx.input_metas[0][0]
    reps = tuple(ctx.attrs["repeats"])
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    interleaved = []
    for r, s in zip(reps, padded):
        interleaved += [r, s]
    g = F.sum(F.reshape(dout, tuple(interleaved)), tuple(range(0, 2 * len(reps), 2)))
    return F.reshape(g, shape)
