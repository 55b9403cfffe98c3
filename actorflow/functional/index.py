"""Indexing functional API: ``x[index]`` and ``x[index] = value`` (``Tensor._getitem`` /
``Tensor._setitem``), gather, scatter, scatter_add, index_select, index_add, masked_select,
masked_scatter, take, gather_nd, nonzero and argwhere.

A Python index is turned into the plain ``index`` attr of the ops in ``actorflow.ops.index``
(see there) plus a list of integer index tensors; bool masks become index tensors through
``nonzero``. Errors in the index itself (too many indices, an index out of range, a float index)
raise IndexError naming the op and the tensor's shape, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.functional._base import as_tensor_like, is_scalar, replicated_like
from actorflow.functional.elementwise import cast, clone, copy_, expand, masked_fill_, where
from actorflow.functional.shape import reshape
from actorflow.ops import registry
from actorflow.ops._common import broadcast_shapes
from actorflow.ops.index import index_shape
from actorflow.ops.registry import OpError
from actorflow.process import groups
from actorflow.tensor import Tensor, register_tensor_methods

_getitem_op = registry.get("getitem")
_getitem_adv_op = registry.get("getitem_advanced")
_getitem_bw_op = registry.get("getitem_backward")
_setitem_op = registry.get("setitem")
_gather_op = registry.get("gather")
_scatter_op = registry.get("scatter")
_index_add_op = registry.get("index_add")
_index_select_op = registry.get("index_select")
_nonzero_op = registry.get("nonzero")

_ALL = ("slice", None, None, None)


# ---- turning a Python index into entries + index tensors --------------------------------------

def _items(index) -> tuple:
    """The index as a tuple of items. A short list holding sequences, slices, None or Ellipsis
    counts as a tuple (NumPy's and PyTorch's legacy rule); any other list is one index array."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32 and any(
            isinstance(i, (Tensor, np.ndarray, list, tuple, slice)) or i is None or i is Ellipsis
            for i in index):
        return tuple(index)
    return (index,)


def _slice_part(op: str, p):
    if p is None or type(p) is int:
        return p
    if isinstance(p, (bool, np.bool_)):
        raise OpError(f"{op}: slice indices must be integers or None, got {p!r}")
    if isinstance(p, (int, np.integer)):
        return int(p)
    if isinstance(p, Tensor) and p.dtype._category == 1 and p.numel() == 1:
        return int(p.item())
    raise OpError(f"{op}: slice indices must be integers or None, got {p!r}")


def _tensor_item(op: str, item):
    """A Tensor for an array-like index item (tensor, ndarray, nested list)."""
    if isinstance(item, Tensor):
        return item
    if isinstance(item, (list, tuple)):
        try:
            arr = np.asarray(_nested_arrays(item))
        except ValueError as e:
            raise IndexError(f"{op}: can't use the sequence {item!r} as an index: {e}") from None
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)
    else:
        arr = item
    if arr.dtype.kind not in "biu":
        raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool "
                         f"tensors, got an array of {arr.dtype}")
    d = dt.from_numpy_dtype(arr.dtype)
    return Tensor._wrap(np.ascontiguousarray(arr, dtype=d.np), d)


def _nested_arrays(item):
    if isinstance(item, Tensor):
        return item._array()
    if isinstance(item, (list, tuple)):
        return [_nested_arrays(i) for i in item]
    return item


def _classify(op: str, item) -> tuple:
    """One index item as a raw entry; ("idx", t) and ("mask", t) still carry their tensor."""
    if type(item) is int:
        return ("int", item)
    if item is None:
        return ("none",)
    if item is Ellipsis:
        return ("ellipsis",)
    if isinstance(item, (bool, np.bool_)):
        return ("bool", bool(item))
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, slice):
        step = _slice_part(op, item.step)
        if step is not None and step <= 0:
            raise OpError(f"{op}: slice step must be positive, got {step}"
                          + (" (negative steps are not supported; use flip)" if step else ""))
        return ("slice", _slice_part(op, item.start), _slice_part(op, item.stop), step)
    if not isinstance(item, (Tensor, np.ndarray, list, tuple)):
        raise IndexError(f"{op}: only integers, slices (`:`), ellipsis (`...`), None and long or "
                         f"bool tensors are valid indices (got {type(item).__name__})")
    t = _tensor_item(op, item)
    if t.dtype is dt.bool_ or t.dtype is dt.uint8:
        return ("bool", bool(t.item())) if not t._shape else ("mask", t)
    if t.dtype._category != 1:
        raise IndexError(f"{op}: tensors used as indices must be long, int, byte or bool "
                         f"tensors, got {t.dtype}")
    if not t._shape:
        return ("int", int(t.item()))  # a 0-dim integer tensor indexes like an int
    return ("idx", t)


def _out_of_range(op: str, value: int, size: int, d: int, shape: tuple) -> IndexError:
    # indexing says both "out of range [lo, hi]" and "out of bounds", as OneFlow's two
    # indexing checks do (its tests match either)
    words = (f"range [{-size}, {size - 1}]: out of bounds" if op in ("getitem", "setitem")
             else "range")
    return IndexError(f"{op}: index {value} is out of {words} for dimension with size {size} "
                      f"(dimension {d} of a tensor of shape {tuple(shape)})")


def _value_range(t: Tensor, op: str) -> tuple:
    """(min, max) of a non-empty integer tensor. Of a split or broadcast global tensor each
    rank reads its own shard and the ranks exchange the two numbers (over the control
    communicator, every rank calling in program order), so checking an index gathers none."""
    if t.is_global and all(s.is_split or s.is_broadcast for s in t.sbp):
        local = t.to_local()
        mine = None
        if local.numel():
            a = local._array()
            mine = (int(a.min()), int(a.max()))
        every = [v for v in groups.allgather_object(mine, f"{op}: the index's range")
                 if v is not None]
        return min(v[0] for v in every), max(v[1] for v in every)
    a = t._array()
    return int(a.min()), int(a.max())


def _check_values(op: str, t: Tensor, size: int, d: int, shape: tuple,
                  negative: bool = True) -> None:
    """Index tensor values must lie in [-size, size), or [0, size) when not ``negative``
    (checked eagerly, so the IndexError comes from the call; traced tensors skip it)."""
    if t.is_lazy or t.numel() == 0:
        return
    lo, hi = _value_range(t, op)
    low = -size if negative else 0
    if lo < low or hi >= size:
        raise _out_of_range(op, lo if lo < low else hi, size, d, shape)


def parse_index(x: Tensor, index, op: str = "getitem") -> tuple:
    """``(entries, tensors)`` for ``x[index]``: the ``index`` attr and the index tensors."""
    items = _items(index)
    raw = [_classify(op, i) for i in items]
    if x.is_global:  # index arrays from Python data (lists, ndarrays): replicated, as numbers
        given = {id(i) for i in items if isinstance(i, Tensor)}
        raw = [(r[0], replicated_like(r[1], x)) + r[2:]
               if r[0] in ("idx", "mask") and id(r[1]) not in given else r for r in raw]
    shape = x._shape
    ndim = len(shape)
    used = 0
    for r in raw:
        if r[0] in ("int", "slice", "idx"):
            used += 1
        elif r[0] == "mask":
            used += len(r[1]._shape)
    if used > ndim:
        raise IndexError(f"{op}: too many indices for a tensor of {ndim} dims ({used} dims "
                         f"indexed; tensor shape {tuple(shape)})")
    entries, tensors, checks = [], [], []
    d = 0
    seen_ellipsis = False
    for r in raw:
        kind = r[0]
        if kind == "int":
            if not -shape[d] <= r[1] < shape[d]:
                raise _out_of_range(op, r[1], shape[d], d, shape)
            entries.append(r)
            d += 1
        elif kind == "slice":
            entries.append(r)
            d += 1
        elif kind == "ellipsis":
            if seen_ellipsis:
                raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
            seen_ellipsis = True
            entries.append(r)
            d += ndim - used
        elif kind == "idx":
            checks.append((r[1], d))
            entries.append(("tensor", len(tensors)))
            tensors.append(r[1])
            d += 1
        elif kind == "mask":
            m = r[1]
            k = len(m._shape)
            if tuple(m._shape) != tuple(shape[d:d + k]):
                raise IndexError(f"{op}: the shape of the mask {tuple(m._shape)} does not match "
                                 f"the shape {tuple(shape[d:d + k])} of the indexed dims "
                                 f"{d}..{d + k - 1} (tensor shape {tuple(shape)})")
            for col in nonzero(m, as_tuple=True):
                entries.append(("tensor", len(tensors)))
                tensors.append(col)
            d += k
        else:  # none, bool
            entries.append(r)
    if checks and _selects_any(entries, tensors):
        for t, dim in checks:
            _check_values(op, t, shape[dim], dim, shape)
    return tuple(entries), tensors


def _selects_any(entries: list, tensors: list) -> bool:
    """Whether the broadcast index tensors pick any element (no bounds to check otherwise)."""
    shapes = [t._shape for t in tensors] + [(int(e[1]),) for e in entries if e[0] == "bool"]
    try:
        return int(np.prod(np.broadcast_shapes(*shapes))) > 0
    except ValueError:  # index_shape reports the mismatch
        return True


def _is_basic(entries: tuple, tensors: list) -> bool:
    return not tensors and not any(e[0] == "bool" for e in entries)


# ---- getitem / setitem ------------------------------------------------------------------------

def getitem_by_spec(x: Tensor, index: tuple, tensors=()) -> Tensor:
    """``x[index]`` for an encoded index (entries + index tensors); used by gradient rules."""
    if _is_basic(index, tensors):
        return apply(_getitem_op, [x], {"index": index})[0]
    return apply(_getitem_adv_op, [x, *tensors], {"index": index})[0]


def getitem_backward(dout: Tensor, index: tuple, tensors, shape) -> Tensor:
    """Zeros of ``shape`` with ``dout`` added at ``index`` (duplicates accumulate)."""
    return apply(_getitem_bw_op, [dout, *tensors], {"index": index, "shape": tuple(shape)})[0]


def setitem_by_spec(x: Tensor, index: tuple, tensors, value: Tensor) -> Tensor:
    """A copy of ``x`` with ``x[index] = value`` (out of place; used by gradient rules)."""
    return apply(_setitem_op, [x, value, *tensors], {"index": index})[0]


def _getitem(self: Tensor, index) -> Tensor:
    """``self[index]``: a view for ints, slices, None and Ellipsis; a copy with index tensors,
    lists or bool masks."""
    entries, tensors = parse_index(self, index, "getitem")
    if _is_basic(entries, tensors):
        return apply(_getitem_op, [self], {"index": entries})[0]
    index_shape("getitem", entries, self._shape, [t._shape for t in tensors])  # IndexErrors
    return apply(_getitem_adv_op, [self, *tensors], {"index": entries})[0]


def _on_placement_of(value: Tensor, like: Tensor) -> Tensor:
    """A global setitem value on another placement than the target ``like``, replicated onto
    ``like``'s placement first (as OneFlow's setitem does); otherwise ``value`` unchanged."""
    if like.is_global and value.is_global and value.placement != like.placement:
        return value.to_global(placement=like.placement,
                               sbp=[SbpParallel.from_attr(("B",))] * len(like.placement.hierarchy))
    return value


def _value_tensor(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        value = _on_placement_of(value, like)
        return value if value.dtype is like.dtype else cast(value, like.dtype)
    if is_scalar(value):  # Python data meeting a global tensor: replicated on its placement
        return replicated_like(Tensor._wrap(np.asarray(value).astype(like.dtype.np),
                                            like.dtype), like)
    arr = np.asarray(_nested_arrays(value))
    return replicated_like(Tensor._wrap(arr.astype(like.dtype.np), like.dtype), like)


def _mask_fill_form(self: Tensor, index, value):
    """The mask, shaped to broadcast against ``self``, when ``self[mask] = value`` is a masked
    fill: the index is one bool mask over the leading dims and ``value`` is a number or a tensor
    that broadcasts to the remaining dims (not one row per true element). That form needs no
    ``nonzero``, so it also runs inside nn.Graph."""
    items = _items(index)
    if len(items) != 1 or not isinstance(items[0], (Tensor, np.ndarray)):
        return None
    m = items[0]
    if m.dtype is not dt.bool_ and m.dtype != np.bool_:
        return None
    m = _tensor_item("setitem", m)
    k = len(m._shape)
    if not k or tuple(m._shape) != tuple(self._shape[:k]):
        return None  # parse_index raises the IndexError naming the shapes
    if isinstance(value, Tensor):
        rest, vshape = tuple(self._shape[k:]), tuple(value._shape)
        while len(vshape) > len(rest) and vshape[0] == 1:
            vshape = vshape[1:]
        if len(vshape) > len(rest) or any(v not in (1, r) for v, r in
                                           zip(vshape[::-1], rest[::-1])):
            return None
    elif not is_scalar(value):
        return None
    if self.is_global and not m.is_global:
        m = replicated_like(m, self)
    return reshape(m, tuple(m._shape) + (1,) * (len(self._shape) - k))


def _setitem(self: Tensor, index, value) -> None:
    """``self[index] = value`` in place (value: a number or a tensor broadcast to the region)."""
    mask = _mask_fill_form(self, index, value)
    if mask is not None:
        if isinstance(value, Tensor):
            v = _on_placement_of(value, self)
            v = v if v.dtype is self.dtype else cast(v, self.dtype)
            if len(v._shape) > len(self._shape):  # leading 1s only (checked above)
                v = reshape(v, v._shape[len(v._shape) - len(self._shape):])
            copy_(self, where(mask, v, clone(self)))
        else:
            masked_fill_(self, mask, np.asarray(value).astype(self.dtype.np).item())
        return
    entries, tensors = parse_index(self, index, "setitem")
    value = _value_tensor(value, self)
    target = index_shape("setitem", entries, self._shape, [t._shape for t in tensors])
    while len(value._shape) > len(target) and value._shape[0] == 1:
        value = reshape(value, value._shape[1:])
    apply(_setitem_op, [self, value, *tensors], {"index": entries}, out=[self])


# ---- gather / scatter / index_select / index_add ----------------------------------------------

def _index_tensor(index) -> Tensor:
    if isinstance(index, Tensor):
        return index
    return _tensor_item("index", index)


def gather(input: Tensor, dim: int, index: Tensor, sparse_grad: bool = False) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` for ``dim=0`` (likewise for other dims)."""
    return apply(_gather_op, [input, _index_tensor(index)], {"dim": int(dim)})[0]


def _scatter_args(dim, index, src, value, reduce):
    if src is not None and value is not None:
        raise TypeError("scatter: give either src or value, not both")
    if src is None and value is None:
        raise TypeError("scatter: missing src (a tensor) or value (a number)")
    if src is not None and not isinstance(src, Tensor):
        if is_scalar(src):
            value, src = src, None
        else:
            src = as_tensor_like(src)
    if isinstance(value, Tensor):
        value = value.item()
    attrs = {"dim": int(dim), "reduce": reduce, "value": value}
    return _index_tensor(index), src, attrs


def scatter(input: Tensor, dim: int, index: Tensor, src=None, reduce: str | None = None, *,
            value=None) -> Tensor:
    """A copy of ``input`` with ``src`` (a tensor or a number) written at ``index`` along
    ``dim``: ``out[index[i][j]][j] = src[i][j]`` for ``dim=0``. ``reduce='add'`` accumulates."""
    index, src, attrs = _scatter_args(dim, index, src, value, reduce)
    if src is not None and src.dtype is not input.dtype:
        src = cast(src, input.dtype)
    inputs = [input, index] if src is None else [input, index, src]
    return apply(_scatter_op, inputs, attrs)[0]


def scatter_(self: Tensor, dim: int, index: Tensor, src=None, reduce: str | None = None, *,
             value=None) -> Tensor:
    """In-place ``scatter``."""
    index, src, attrs = _scatter_args(dim, index, src, value, reduce)
    if src is not None and src.dtype is not self.dtype:
        src = cast(src, self.dtype)
    inputs = [self, index] if src is None else [self, index, src]
    return apply(_scatter_op, inputs, attrs, out=[self])[0]


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (duplicates add up)."""
    return scatter(input, dim, index, src, reduce="add")


def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """In-place ``scatter_add``."""
    return scatter_(self, dim, index, src, reduce="add")


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices of ``input`` at positions ``index`` (1-d, each in ``[0, size)``: negative
    indices raise an IndexError, as in PyTorch) along ``dim``."""
    index = _index_tensor(index)
    if len(index._shape) > 1 or index.dtype._category != 1:
        raise IndexError(f"index_select: index must be a 1-d integer tensor, got shape "
                         f"{tuple(index._shape)} and dtype {index.dtype}")
    if not index._shape:
        index = reshape(index, (1,))
    ndim = len(input._shape)
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"index_select: dim {dim} is out of range for a tensor of {ndim} dims")
    if ndim == 0:
        input = reshape(input, (1,))
        ndim = 1
    dim %= ndim
    _check_values("index_select", index, input._shape[dim], dim, input._shape, negative=False)
    return apply(_index_select_op, [input, index], {"dim": dim})[0]


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """A copy of ``input`` with ``alpha * source`` added at ``index`` along ``dim``."""
    if source.dtype is not input.dtype:
        source = cast(source, input.dtype)
    return apply(_index_add_op, [input, _index_tensor(index), source],
                 {"dim": int(dim), "alpha": alpha})[0]


def index_add_(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """In-place ``index_add``."""
    if source.dtype is not self.dtype:
        source = cast(source, self.dtype)
    return apply(_index_add_op, [self, _index_tensor(index), source],
                 {"dim": int(dim), "alpha": alpha}, out=[self])[0]


def take(input: Tensor, index) -> Tensor:
    """``input`` read as 1-d at positions ``index``; the result has ``index``'s shape."""
    return _getitem(reshape(input, (-1,)), _index_tensor(index))


def gather_nd(params: Tensor, indices: Tensor) -> Tensor:
    """OneFlow's gather_nd: ``indices[..., :k]`` picks elements (or slices) of the first ``k``
    dims of ``params``; the result has shape ``indices.shape[:-1] + params.shape[k:]``."""
    indices = _index_tensor(indices)
    if not indices._shape or indices.dtype._category != 1:
        raise IndexError(f"gather_nd: indices must be an integer tensor of at least 1 dim, got "
                         f"shape {tuple(indices._shape)} and dtype {indices.dtype}")
    k = indices._shape[-1]
    if not 1 <= k <= len(params._shape):
        raise IndexError(f"gather_nd: the last dim of indices ({k}) must be between 1 and the "
                         f"number of dims of params (params shape {tuple(params._shape)}, "
                         f"indices shape {tuple(indices._shape)})")
    cols = [getitem_by_spec(indices, (("ellipsis",), ("int", i))) for i in range(k)]
    for i, c in enumerate(cols):
        _check_values("gather_nd", c, params._shape[i], i, params._shape)
    entries = tuple(("tensor", i) for i in range(k))
    return apply(_getitem_adv_op, [params, *cols], {"index": entries})[0]


# ---- masks ------------------------------------------------------------------------------------

def _bool_mask(mask) -> Tensor:
    mask = _index_tensor(mask) if not isinstance(mask, Tensor) else mask
    return mask if mask.dtype is dt.bool_ else cast(mask, dt.bool_)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` is true (both broadcast), as a 1-d tensor."""
    mask = _bool_mask(mask)
    shape = broadcast_shapes("masked_select", input._shape, mask._shape)
    x = input if tuple(input._shape) == shape else expand(input, shape)
    m = mask if tuple(mask._shape) == shape else expand(mask, shape)
    if not shape:
        return _getitem(x, bool(m.item()))
    return _getitem(x, m)


def _masked_scatter_plan(input: Tensor, mask, source: Tensor):
    mask = _bool_mask(mask)
    shape = broadcast_shapes("masked_scatter", input._shape, mask._shape)
    if shape != tuple(input._shape):
        raise OpError(f"masked_scatter: the mask of shape {tuple(mask._shape)} must broadcast to "
                      f"the input's shape {tuple(input._shape)}")
    m = mask if tuple(mask._shape) == shape else expand(mask, shape)
    if shape:
        cols = nonzero(m, as_tuple=True)
        entries = tuple(("tensor", i) for i in range(len(cols)))
        count = cols[0]._shape[0]
    else:
        cols, count = [], int(bool(m.item()))
        entries = (("bool", bool(count)),)
    flat = reshape(source, (-1,))
    if flat._shape[0] < count:
        raise OpError(f"masked_scatter: source has {flat._shape[0]} elements but the mask "
                      f"selects {count} (source shape {tuple(source._shape)})")
    value = getitem_by_spec(flat, (("slice", 0, count, None),))
    if value.dtype is not input.dtype:
        value = cast(value, input.dtype)
    return entries, cols, value


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` with the elements where ``mask`` is true replaced, in order, by the
    leading elements of ``source``."""
    entries, cols, value = _masked_scatter_plan(input, mask, source)
    return setitem_by_spec(input, entries, cols, value)


def masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """In-place ``masked_scatter``."""
    entries, cols, value = _masked_scatter_plan(self, mask, source)
    return apply(_setitem_op, [self, value, *cols], {"index": entries}, out=[self])[0]


def nonzero(input: Tensor, as_tuple: bool = False):
    """Coordinates of the nonzero elements: a ``(n, ndim)`` int64 tensor, or with
    ``as_tuple=True`` one 1-d tensor per dim (a 0-d input counts as 1-d)."""
    if not as_tuple:
        return apply(_nonzero_op, [input], {"dtype": dt.int64})[0]
    if not input._shape:
        input = reshape(input, (1,))
    out = apply(_nonzero_op, [input], {"dtype": dt.int64})[0]
    return tuple(getitem_by_spec(out, (_ALL, ("int", i))) for i in range(len(input._shape)))


def argwhere(input: Tensor, dtype=dt.int32) -> Tensor:
    """Coordinates of the nonzero elements as an ``(n, ndim)`` tensor (OneFlow: int32)."""
    return apply(_nonzero_op, [input], {"dtype": dt.as_dtype(dtype)})[0]


register_tensor_methods({
    "_getitem": _getitem, "_setitem": _setitem, "gather": gather, "scatter": scatter,
    "scatter_": scatter_, "scatter_add": scatter_add, "scatter_add_": scatter_add_,
    "index_select": index_select, "index_add": index_add, "index_add_": index_add_,
    "masked_select": masked_select, "masked_scatter": masked_scatter,
    "masked_scatter_": masked_scatter_, "take": take, "nonzero": nonzero, "argwhere": argwhere,
})

# ---- one_hot ------------------------------------------------------------------------------------

_one_hot_op = registry.get("one_hot")
_amax_op = registry.get("amax")


def one_hot(input: Tensor, num_classes: int = -1, on_value=1, off_value=0) -> Tensor:
    """``input.shape + (num_classes,)`` tensor with ``on_value`` at each element's class and
    ``off_value`` elsewhere (int64; the default float dtype when either value is a float).
    ``num_classes=-1`` takes the largest class + 1, which reads the input (eager only)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"one_hot: expected a Tensor, got {type(input).__name__}")
    shape = tuple(input._shape)
    if input.dtype._category != 1:
        raise TypeError(f"one_hot: expected an integer (index) tensor, got {input.dtype} (input "
                        f"shape {shape})")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) \
            or num_classes < -1:
        raise ValueError(f"one_hot: num_classes must be -1 or a non-negative int, got "
                         f"{num_classes!r} (input shape {shape})")
    for v in (on_value, off_value):
        if not is_scalar(v):
            raise TypeError(f"one_hot: on_value and off_value must be numbers, got {v!r}")
    num_classes = int(num_classes)
    if num_classes == -1:
        if input.is_lazy:
            raise ValueError(f"one_hot: num_classes=-1 needs the input's values, which a traced "
                             f"graph does not know; pass num_classes (input shape {shape})")
        if input.numel() == 0:
            raise ValueError(f"one_hot: cannot infer num_classes from an empty tensor (input "
                             f"shape {shape})")
        top = apply(_amax_op, [input], {"dim": None, "keepdim": False})[0].item()
        num_classes = max(int(top) + 1, 0)  # a negative class is reported by the kernel
    floating = any(isinstance(v, (float, np.floating)) for v in (on_value, off_value))
    dtype = dt.get_default_dtype() if floating else dt.int64
    return apply(_one_hot_op, [input], {"num_classes": num_classes, "on_value": on_value,
                                        "off_value": off_value, "dtype": dtype})[0]


__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "masked_select",
           "masked_scatter", "take", "gather_nd", "nonzero", "argwhere", "getitem_by_spec",
           "getitem_backward", "setitem_by_spec", "parse_index"]
