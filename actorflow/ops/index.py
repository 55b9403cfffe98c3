"""Indexing ops: ``x[index]`` (getitem) and ``x[index] = v`` (setitem); gather / scatter,
index_select, index_add, nonzero and one_hot are in ``actorflow/ops/gather.py``.

Negative indices: ``x[index]`` / ``x[index] = v`` wrap them (from the end, as Python and PyTorch
do); gather, scatter, index_select, index_add, embedding and one_hot raise for them, as PyTorch
does. Kernels check the bounds themselves (an index tensor's values are known only when the
kernel runs, in eager mode and in a graph).

An index such as ``x[1, ::2, None, ..., t]`` is encoded as a tuple of plain entries (the attr
``index``), so the op can be serialised and traced; index tensors are extra op inputs:

* ``("int", i)``, ``("slice", start, stop, step)``, ``("none",)``, ``("ellipsis",)``;
* ``("bool", b)``: a Python bool, a new axis of length 1 (True) or 0 (False) that takes part in
  advanced indexing, as in PyTorch and NumPy;
* ``("tensor", k)``: the k-th index tensor (integer dtype). The functional layer turns bool masks
  into integer index tensors with ``nonzero``.

Semantics follow PyTorch: ints, slices, None and Ellipsis are applied first (a NumPy view); the
index tensors then index their dims of that view together (broadcast against each other). The
broadcast dims replace the indexed dims in place when those are adjacent, else they go first.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, add_at
from actorflow.ops.boxing import P, S, Sig, shard_range, shard_shape
from actorflow.ops.registry import Meta, fail, register

_CONSUMES_DIM = ("int", "slice", "tensor")


# ---- the index plan shared by inference and kernels -------------------------------------------

def walk_index(op_name: str, entries: tuple, shape: tuple):
    """Resolve ``entries`` against ``shape``.

    Returns ``(basic, adv, dims)``: ``basic`` is the NumPy tuple for the first (view) step,
    ``adv`` lists ``(position in the view, entry)`` of the advanced entries, ``dims`` is the
    shape of the view. Raises IndexError for too many indices or an int out of range.
    """
    used = ellipses = 0
    for e in entries:
        if e[0] in _CONSUMES_DIM:
            used += 1
        elif e[0] == "ellipsis":
            ellipses += 1
    if used > len(shape):
        raise IndexError(f"{op_name}: too many indices for a tensor of {len(shape)} dims "
                         f"({used} dims indexed; tensor shape {tuple(shape)})")
    if ellipses > 1:
        raise IndexError(f"{op_name}: an index can only have a single ellipsis ('...')")
    basic, adv, dims = [], [], []
    d = 0
    for e in entries:
        kind = e[0]
        if kind == "int":
            n = shape[d]
            if not -n <= e[1] < n:
                raise IndexError(f"{op_name}: index {e[1]} is out of range [{-n}, {n - 1}]: out "
                                 f"of bounds for dimension with size {n} (dimension {d} of a "
                                 f"tensor of shape {tuple(shape)})")
            basic.append(e[1])
            d += 1
        elif kind == "slice":
            s = slice(e[1], e[2], e[3])
            if s.step is not None and s.step <= 0:
                raise ValueError(f"{op_name}: slice step must be positive, got {s.step}")
            dims.append(len(range(*s.indices(shape[d]))))
            basic.append(s)
            d += 1
        elif kind == "none":
            basic.append(None)
            dims.append(1)
        elif kind == "ellipsis":
            k = len(shape) - used
            basic.extend([slice(None)] * k)
            dims.extend(shape[d:d + k])
            d += k
        elif kind == "bool":
            adv.append((len(dims), e))
            basic.append(None)
            dims.append(1)
        elif kind == "tensor":
            adv.append((len(dims), e))
            basic.append(slice(None))
            dims.append(shape[d])
            d += 1
        else:
            raise ValueError(f"{op_name}: unknown index entry {e!r}")
    dims.extend(shape[d:])
    basic.append(Ellipsis)  # makes NumPy return a (0-d) array view, never a scalar
    return tuple(basic), adv, dims


def _broadcast_index_shapes(op_name: str, shapes: list) -> tuple:
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise IndexError(f"{op_name}: shape mismatch: indexing tensors could not be "
                                 f"broadcast together with shapes "
                                 + ", ".join(str(tuple(t)) for t in shapes))
    return tuple(out)


def index_shape(op_name: str, entries: tuple, shape: tuple, tensor_shapes) -> tuple:
    """The shape of ``x[index]`` for a tensor of ``shape`` and index tensors of those shapes."""
    _, adv, dims = walk_index(op_name, entries, shape)
    if not adv:
        return tuple(dims)
    shapes = [tuple(tensor_shapes[e[1]]) if e[0] == "tensor" else ((1 if e[1] else 0),)
              for _, e in adv]
    bshape = _broadcast_index_shapes(op_name, shapes)
    pos = [p for p, _ in adv]
    if pos == list(range(pos[0], pos[0] + len(pos))):
        return tuple(dims[:pos[0]]) + bshape + tuple(dims[pos[-1] + 1:])
    return bshape + tuple(n for i, n in enumerate(dims) if i not in pos)


def _advanced(view_ndim: int, adv: list, arrays: list) -> tuple:
    """The NumPy index applying the advanced entries to the view from the basic step."""
    full = [slice(None)] * view_ndim
    for pos, e in adv:
        full[pos] = arrays[e[1]] if e[0] == "tensor" else np.arange(1 if e[1] else 0)
    return tuple(full)


def _check_index_dtypes(op_name: str, tensors) -> None:
    for t in tensors:
        if t.dtype._category != 1:
            fail(op_name, f"index tensors must have an integer dtype, got {t.dtype}", t._shape)


def saved_index_inputs(ctx, start: int) -> list:
    """Saved inputs ``start:`` of an indexing node (index tensors, values), checked against
    in-place changes. The indexed tensor itself is not read by these gradient rules, so writing
    into it later (``x[0] = a; x[1] = b``) must not break backward."""
    if ctx.freed:
        ctx._check_saved()  # raises the "backward through the graph a second time" error
    saved = ctx._inputs[start:]
    for t, v in zip(saved, ctx._versions[start:]):
        if t._vc[0] != v:
            raise RuntimeError(f"{ctx.name()}: an index or value tensor of shape "
                               f"{tuple(t._shape)} needed for the gradient was modified by an "
                               f"in-place operation (version {t._vc[0]}, expected {v})")
    return saved


# ---- getitem ----------------------------------------------------------------------------------

getitem = register("getitem", doc="Basic indexing (ints, slices, None, Ellipsis); a view in eager.")


@getitem.infer
def _(inputs, attrs):
    x = inputs[0]
    entries = attrs["index"]
    if any(e[0] in ("tensor", "bool") for e in entries):
        fail("getitem", "advanced index entries belong to the op getitem_advanced")
    return [Meta(index_shape("getitem", entries, x._shape, ()), x.dtype)]


def kept_dims(entries: tuple, shape: tuple) -> dict:
    """``{input dim: output dim}`` of the dims a basic index takes whole (a full slice, the
    ellipsis, the dims after the last entry): a split there stays a split."""
    if any(e[0] in ("tensor", "bool") for e in entries):
        return {}
    kept, d, o = {}, 0, 0
    used = sum(e[0] in _CONSUMES_DIM for e in entries)
    for e in entries:
        if e[0] == "int":
            d += 1
        elif e[0] == "slice":
            if slice(e[1], e[2], e[3]).indices(shape[d]) == (0, shape[d], 1):
                kept[d] = o
            d, o = d + 1, o + 1
        elif e[0] == "none":
            o += 1
        elif e[0] == "ellipsis":
            for _ in range(len(shape) - used):
                kept[d] = o
                d, o = d + 1, o + 1
    for d2 in range(d, len(shape)):
        kept[d2] = o + d2 - d
    return kept


def sliced_dims(entries: tuple, shape: tuple) -> dict:
    """``{input dim: (output dim, entry position)}`` of the dims a basic index slices (a
    slice entry that does not take the dim whole)."""
    if any(e[0] in ("tensor", "bool") for e in entries):
        return {}
    out, d, o = {}, 0, 0
    used = sum(e[0] in _CONSUMES_DIM for e in entries)
    for k, e in enumerate(entries):
        if e[0] == "int":
            d += 1
        elif e[0] == "slice":
            if slice(e[1], e[2], e[3]).indices(shape[d]) != (0, shape[d], 1):
                out[d] = (o, k)
            d, o = d + 1, o + 1
        elif e[0] == "none":
            o += 1
        elif e[0] == "ellipsis":
            d, o = d + len(shape) - used, o + len(shape) - used
    return out


def _shard_slice(entry: tuple, size: int, lo: int, hi: int) -> tuple:
    """For a slice ``entry`` of a dim of ``size`` and the shard ``[lo, hi)`` of it: the slice
    of the shard it takes and ``(k0, k1)``, the output positions those elements fill."""
    a, b, step = slice(entry[1], entry[2], entry[3]).indices(size)
    m = len(range(a, b, step))
    k0 = min(m, max(0, -(-(lo - a) // step)))
    k1 = min(m, max(0, -(-(hi - a) // step)))
    if k1 <= k0:
        return ("slice", 0, 0, 1), (k0, k0)
    return ("slice", a + k0 * step - lo, a + (k1 - 1) * step - lo + 1, step), (k0, k1)


def _slice_of_split(d: int, o: int, k: int, size: int):
    """The (local, post) pair of getitem on x split along a dim ``d`` the index slices (entry
    ``k``, landing on output dim ``o``): each rank takes the part of the slice its shard holds
    and zeros elsewhere, so the output is the partial sum of the ranks' results (OneFlow's)."""
    def local(attrs, index, n):
        entries = list(attrs["index"])
        entries[k], _ = _shard_slice(entries[k], size, *shard_range(size, n, index))
        return dict(attrs, index=tuple(entries))

    def post(outs, attrs, index, n):
        y = outs[0]
        m = len(range(*slice(*attrs["index"][k][1:]).indices(size)))
        _, (k0, k1) = _shard_slice(attrs["index"][k], size, *shard_range(size, n, index))
        pad = [0] * (2 * (len(y._shape) - 1 - o)) + [k0, m - k1]
        return [F.pad(y, tuple(pad))]
    return local, post


@getitem.sbp
def _(inputs, attrs):
    """x split on a dim the index takes whole: the result split on where that dim lands;
    split on a dim it slices: partial sums (each rank's part of the slice, zeros elsewhere,
    as OneFlow's slice); partial sums stay partial."""
    shape = tuple(inputs[0]._shape)
    for d, o in kept_dims(attrs["index"], shape).items():
        yield Sig((S(d),), (S(o),))
    for d, (o, k) in sliced_dims(attrs["index"], shape).items():
        local, post = _slice_of_split(d, o, k, shape[d])
        yield Sig((S(d),), (P,), post, local)
    yield Sig((P,), (P,))


@getitem.view
def _(ins, attrs):
    basic, _, _ = walk_index("getitem", attrs["index"], ins[0].shape)
    return [ins[0][basic]]


def write_into(base, index: tuple, view):
    """``base`` with ``base[index]`` (an index spec, as getitem's attr) replaced by ``view``'s
    values, out of place: the write-back of the views that select a part of their base."""
    target = tuple(index_shape("setitem", index, tuple(base._shape), ()))
    value = view if tuple(view._shape) == target else F.reshape(view, target)
    return F.setitem_by_spec(base, index, (), value)


@getitem.view_write
def _(base, view, attrs, idx):
    return write_into(base, tuple(attrs["index"]), view)


@getitem.kernel("cpu")
def _(ins, outs, attrs):
    basic, _, _ = walk_index("getitem", attrs["index"], ins[0].shape)
    outs[0][...] = ins[0][basic]


@getitem.grad
def _(ctx, dout):
    return F.getitem_backward(dout, ctx.attrs["index"], (), ctx.input_metas[0][0])


getitem_advanced = register("getitem_advanced",
                            doc="Indexing with index tensors (a copy); inputs are x, *indices.")


@getitem_advanced.infer
def _(inputs, attrs):
    x, tensors = inputs[0], inputs[1:]
    _check_index_dtypes("getitem_advanced", tensors)
    shape = index_shape("getitem_advanced", attrs["index"], x._shape, [t._shape for t in tensors])
    return [Meta(shape, x.dtype)]


@getitem_advanced.kernel("cpu")
def _(ins, outs, attrs):
    basic, adv, _ = walk_index("getitem_advanced", attrs["index"], ins[0].shape)
    view = ins[0][basic]
    outs[0][...] = view[_advanced(view.ndim, adv, ins[1:])]


@getitem_advanced.grad
def _(ctx, dout):
    tensors = saved_index_inputs(ctx, 1)
    dx = F.getitem_backward(dout, ctx.attrs["index"], tuple(tensors), ctx.input_metas[0][0])
    return (dx,) + (None,) * len(tensors)


getitem_backward = register("getitem_backward",
                            doc="Scatter-add of dout into zeros of the indexed tensor's shape.")


@getitem_backward.infer
def _(inputs, attrs):
    g, tensors = inputs[0], inputs[1:]
    shape = tuple(attrs["shape"])
    want = index_shape("getitem_backward", attrs["index"], shape, [t._shape for t in tensors])
    if tuple(g._shape) != want:
        fail("getitem_backward", f"dout of shape {tuple(g._shape)} does not match the indexed "
             f"shape {want}", g._shape, shape)
    return [Meta(shape, g.dtype)]


@getitem_backward.sbp
def _(inputs, attrs):
    """(basic indexing) dout split on where a dim taken whole landed: the gradient split on
    that dim, each rank writing its shard of the zeros; partial sums stay partial."""
    if len(inputs) > 1:
        return
    shape = tuple(attrs["shape"])
    for d, o in kept_dims(attrs["index"], shape).items():
        def local(attrs, index, n, d=d):
            return dict(attrs, shape=shard_shape(shape, S(d), n, index))
        yield Sig((S(o),), (S(d),), None, local)
    yield Sig((P,), (P,))


@getitem_backward.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    out.fill(0)
    basic, adv, _ = walk_index("getitem_backward", attrs["index"], out.shape)
    view = out[basic]
    if adv:
        add_at(view, _advanced(view.ndim, adv, ins[1:]), ins[0])  # duplicates accumulate
    else:
        view[...] = ins[0]


@getitem_backward.grad
def _(ctx, dout):
    tensors = saved_index_inputs(ctx, 1) if len(ctx.input_metas) > 1 else []
    return (F.getitem_by_spec(dout, ctx.attrs["index"], tuple(tensors)),) + (None,) * len(tensors)


# ---- setitem ----------------------------------------------------------------------------------

setitem = register("setitem", doc="x with x[index] = value (in place when called with out=[x]); "
                                  "inputs are x, value, *indices.")


@setitem.infer
def _(inputs, attrs):
    x, value, tensors = inputs[0], inputs[1], inputs[2:]
    _check_index_dtypes("setitem", tensors)
    target = index_shape("setitem", attrs["index"], x._shape, [t._shape for t in tensors])
    vs = tuple(value._shape)
    ok = len(vs) <= len(target) and all(
        v == 1 or v == t for v, t in zip(vs[::-1], target[::-1]))
    if not ok:
        fail("setitem", f"a value of shape {vs} can't be assigned to an indexed region of shape "
             f"{target}", x._shape, vs)
    return [Meta(x._shape, x.dtype)]


@setitem.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    if out is not ins[0]:
        out[...] = ins[0]
    basic, adv, _ = walk_index("setitem", attrs["index"], out.shape)
    view = out[basic]
    if adv:
        view[_advanced(view.ndim, adv, ins[2:])] = ins[1]
    else:
        view[...] = ins[1]


@setitem.grad
def _(ctx, dout):
    saved = saved_index_inputs(ctx, 2)
    entries, tensors = ctx.attrs["index"], tuple(saved)
    dx = dv = None
    if ctx.needs_input_grad[0]:
        dx = F.setitem_by_spec(dout, entries, tensors, F.as_tensor_like(0, dout))
    if ctx.needs_input_grad[1]:
        dv = F.sum_to(F.getitem_by_spec(dout, entries, tensors), ctx.input_metas[1][0])
    return (dx, dv) + (None,) * len(tensors)
