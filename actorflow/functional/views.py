"""More shape and view functions: atleast_Nd, h/v/d/column stacks and splits, tensor_split,
select, meshgrid, broadcast_like, repeat_interleave, OneFlow's slice/slice_update, diag,
diagonal, as_strided, storage_offset and the in-place squeeze_/unsqueeze_/contiguous_.

Most are composites of the shape and index ops; diagonal and as_strided are ops of their own
(``actorflow.ops.views``).
"""
from __future__ import annotations

import builtins

import numpy as np

from actorflow.dispatch import apply, lazy_views
from actorflow.dispatch.lazy import current_tracer
from actorflow.framework import dtype as dt
from actorflow.functional.elementwise import clone, expand
from actorflow.functional.index import index_select
from actorflow.functional.shape import cat, contiguous, narrow, reshape, squeeze, unsqueeze
from actorflow.ops import registry
from actorflow.ops._common import norm_axis
from actorflow.ops.registry import fail
from actorflow.tensor import EagerBlob, Tensor, register_tensor_methods

_diagonal = registry.get("diagonal")
_diagonal_bw = registry.get("diagonal_backward")
_as_strided = registry.get("as_strided")


def _tensors(name: str, tensors) -> tuple:
    """``f(x)``, ``f(x, y)`` or ``f([x, y])``: (list of tensors, whether one was given alone)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
        single = False
    else:
        single = len(tensors) == 1
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected tensors, got {type(t).__name__}")
    return list(tensors), single


# ---- atleast_Nd ----------------------------------------------------------------------------------

def _at_least(x: Tensor, n: int) -> Tensor:
    shape = tuple(x._shape)
    if len(shape) >= n:
        return x
    if n == 3 and len(shape) == 1:
        return reshape(x, (1,) + shape + (1,))
    if n == 3 and len(shape) == 2:
        return reshape(x, shape + (1,))
    return reshape(x, (1,) * (n - len(shape)) + shape)


def _atleast_fn(n: int):
    def fn(*tensors):
        ts, single = _tensors(f"atleast_{n}d", tensors)
        res = tuple(_at_least(t, n) for t in ts)
        return res[0] if single else res
    fn.__name__ = f"atleast_{n}d"
    fn.__doc__ = (f"Each tensor viewed with at least {n} dims (one tensor: a tensor; several or "
                  "a list: a tuple).")
    return fn


atleast_1d = _atleast_fn(1)
atleast_2d = _atleast_fn(2)
atleast_3d = _atleast_fn(3)


# ---- stacks --------------------------------------------------------------------------------------

def hstack(tensors) -> Tensor:
    """Concatenate column-wise: along dim 0 for 1-D tensors, else dim 1."""
    ts = [_at_least(t, 1) for t in _tensors("hstack", (tensors,))[0]]
    return cat(ts, 0 if ts and len(ts[0]._shape) == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenate row-wise (dim 0) after making each tensor at least 2-D."""
    return cat([_at_least(t, 2) for t in _tensors("vstack", (tensors,))[0]], 0)


row_stack = vstack


def dstack(tensors) -> Tensor:
    """Concatenate depth-wise (dim 2) after making each tensor at least 3-D."""
    return cat([_at_least(t, 3) for t in _tensors("dstack", (tensors,))[0]], 2)


def column_stack(tensors) -> Tensor:
    """Concatenate along dim 1; 0-D and 1-D tensors become columns first."""
    ts = _tensors("column_stack", (tensors,))[0]
    return cat([reshape(t, (t.numel(), 1)) if len(t._shape) <= 1 else t for t in ts], 1)


# ---- splits --------------------------------------------------------------------------------------

def tensor_split(x: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Split ``dim`` into ``n`` near-equal parts (the first ``size % n`` one longer) or at the
    given indices; the parts are views."""
    if not x._shape:
        fail("tensor_split", "expects a tensor with at least 1 dim", x._shape)
    d = norm_axis("tensor_split", dim, len(x._shape))
    size = x._shape[d]
    if isinstance(indices_or_sections, Tensor):
        v = indices_or_sections
        indices_or_sections = int(v.item()) if not v._shape else [int(i) for i in v.tolist()]
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0:
            fail("tensor_split", f"number of sections must be larger than 0, got {n}", x._shape)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + size // n + (1 if i < size % n else 0))
    else:
        bounds = [0] + [min(max(int(i) + (size if i < 0 else 0), 0), size)
                        for i in indices_or_sections] + [size]
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        a = min(a, size)
        parts.append(narrow(x, d, a, max(b - a, 0)))
    return tuple(parts)


def _split_dim(name: str, x: Tensor, sections, dim: int, min_ndim: int) -> tuple:
    if len(x._shape) < min_ndim:
        fail(name, f"requires a tensor with at least {min_ndim} dims, but got "
             f"{len(x._shape)}", x._shape)
    if isinstance(sections, (int, np.integer)):
        size = x._shape[dim]
        if sections <= 0 or size % sections:
            fail(name, f"dim {dim} of size {size} is not divisible by the split size "
                 f"{sections}", x._shape)
    return tensor_split(x, sections, dim)


def hsplit(x: Tensor, indices_or_sections) -> tuple:
    """Split horizontally: along dim 1 (dim 0 for a 1-D tensor)."""
    return _split_dim("hsplit", x, indices_or_sections, 0 if len(x._shape) == 1 else 1, 1)


def vsplit(x: Tensor, indices_or_sections) -> tuple:
    """Split along dim 0 of a tensor with at least 2 dims."""
    return _split_dim("vsplit", x, indices_or_sections, 0, 2)


def dsplit(x: Tensor, indices_or_sections) -> tuple:
    """Split along dim 2 of a tensor with at least 3 dims."""
    return _split_dim("dsplit", x, indices_or_sections, 2, 3)


# ---- select, meshgrid, broadcast_like, repeat_interleave -----------------------------------------

def select(x: Tensor, dim: int, index) -> Tensor:
    """The slice ``index`` of ``dim``, with that dim removed (a view)."""
    if not x._shape:
        fail("select", "cannot select from a 0-d tensor", x._shape)
    d = norm_axis("select", dim, len(x._shape))
    size = x._shape[d]
    i = int(index)
    if not -size <= i < size:
        raise IndexError(f"select: index {i} is out of range for dim {d} of size {size} "
                         f"(shape {tuple(x._shape)})")
    part = narrow(x, d, i % size, 1)
    return reshape(part, tuple(x._shape[:d]) + tuple(x._shape[d + 1:]))


def meshgrid(*tensors, indexing: str = "ij") -> tuple:
    """Coordinate grids of 1-D (or 0-D) tensors: 'ij' indexing (matrix) or 'xy' (Cartesian,
    the first two dims swapped)."""
    ts, _ = _tensors("meshgrid", tensors)
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(len(t._shape) > 1 for t in ts):
        fail("meshgrid", "expects 0-D or 1-D tensors", *[t._shape for t in ts])
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = tuple(t.numel() for t in ts)
    grids = []
    for i, t in enumerate(ts):
        shape = [1] * len(ts)
        shape[i] = sizes[i]
        grids.append(expand(reshape(t, tuple(shape)), sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def broadcast_like(x: Tensor, like: Tensor, broadcast_axes=None) -> Tensor:
    """``x`` broadcast to ``like``'s shape. With ``broadcast_axes``, a tensor with fewer dims
    gets size-1 dims inserted at those axes first; else it is aligned to the right."""
    target = tuple(like._shape)
    shape = tuple(x._shape)
    if broadcast_axes is not None and len(shape) < len(target):
        axes = sorted(norm_axis("broadcast_like", a, len(target)) for a in broadcast_axes)
        if len(shape) + len(axes) == len(target):
            full, it = [], iter(shape)
            for i in range(len(target)):
                full.append(1 if i in axes else next(it))
            x = reshape(x, tuple(full))
    return expand(x, target)


def repeat_interleave(x: Tensor, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Repeat each element ``repeats`` times (an int, or a tensor with one count per element of
    ``dim``) along ``dim`` (the flattened tensor when None). ``repeat_interleave(counts)``
    alone gives ``arange(len(counts))`` repeated by the counts."""
    if repeats is None:
        counts = np.asarray(x.tolist(), dtype=np.int64).reshape(-1)
        return Tensor._wrap(np.repeat(np.arange(counts.size, dtype=np.int64), counts), x.dtype)
    if dim is None:
        x, d = reshape(x, (-1,)), 0
    else:
        d = norm_axis("repeat_interleave", dim, len(x._shape))
    n = x._shape[d] if x._shape else 1
    if isinstance(repeats, Tensor):
        counts = np.asarray(repeats.tolist(), dtype=np.int64).reshape(-1)
    else:
        counts = np.asarray(repeats, dtype=np.int64).reshape(-1)
    if counts.size == 1:
        counts = np.full(n, counts[0], dtype=np.int64)
    if counts.size != n or (counts < 0).any():
        fail("repeat_interleave", f"repeats must be non-negative and have one count per "
             f"element of dim {d} (size {n}), got {counts.size}", x._shape)
    index = np.repeat(np.arange(n, dtype=np.int64), counts)
    if output_size is not None and int(output_size) != index.size:
        fail("repeat_interleave", f"output_size {output_size} does not match the sum of the "
             f"repeats ({index.size})", x._shape)
    return index_select(x, d, Tensor._wrap(index, dt.int64))


# ---- OneFlow's slice / slice_update --------------------------------------------------------------

def _slices(x: Tensor, slice_tup_list) -> tuple:
    if len(slice_tup_list) > len(x._shape):
        fail("slice", f"{len(slice_tup_list)} slices for a tensor of {len(x._shape)} dims",
             x._shape)
    return tuple(builtins.slice(*tuple(s)) for s in slice_tup_list)


def slice(x: Tensor, slice_tup_list) -> Tensor:  # noqa: A001  (OneFlow's flow.slice)
    """``x`` sliced by ``[[start, stop, step], ...]``, one triple per leading dim."""
    return x[_slices(x, slice_tup_list)]


def slice_update(x: Tensor, update, slice_tup_list, stop=None, step=None,
                 inplace: bool = True) -> Tensor:
    """Write ``update`` into the slice ``[[start, stop, step], ...]`` of ``x`` (in place,
    returning ``x``; ``inplace=False`` writes into a copy). Also takes OneFlow's functional
    form ``slice_update(x, update, starts, stops, steps)``."""
    if stop is not None:
        slice_tup_list = list(zip(slice_tup_list, stop, step))
    target = x if inplace else clone(x)
    target[_slices(x, slice_tup_list)] = update
    return target


# ---- diag, diagonal, as_strided ------------------------------------------------------------------

def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims ``dim1`` and ``dim2`` (above it for ``offset > 0``), as the last
    dim; a view."""
    return apply(_diagonal, [x], {"offset": int(offset), "dim1": int(dim1),
                                  "dim2": int(dim2)})[0]


_diagonal_fn = diagonal


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D tensor's values on the ``diagonal`` of a square matrix, or a 2-D tensor's
    ``diagonal`` as a 1-D tensor."""
    if len(x._shape) == 1:
        n = x._shape[0] + abs(int(diagonal))
        return apply(_diagonal_bw, [x], {"shape": (n, n), "offset": int(diagonal), "dim1": 0,
                                         "dim2": 1})[0]
    if len(x._shape) != 2:
        fail("diag", f"expects a 1-D or 2-D tensor, got {len(x._shape)} dims", x._shape)
    return contiguous(_diagonal_fn(x, diagonal))


def storage_offset(x: Tensor) -> int:
    """The offset, in elements, of the tensor's first element in the memory it views."""
    h = x._h
    if type(h) is not EagerBlob:
        return 0
    a = owner = h.raw
    while True:  # strided views (expand, diagonal) hold their array one object further down
        b = owner.base
        if not isinstance(b, np.ndarray):
            b = getattr(b, "base", None)
        if not isinstance(b, np.ndarray):
            break
        owner = b
    if a.size == 0:
        return 0
    diff = a.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return diff // a.itemsize


def as_strided(x: Tensor, size, stride, storage_offset=None) -> Tensor:
    """The elements of ``x``'s memory at ``storage_offset + sum(i[k] * stride[k])`` for each
    index ``i`` of ``size`` (PyTorch's semantics; the offset defaults to ``x``'s). A view
    (in eager; the compiled runtime may copy), writable; every element read must be one of
    ``x``'s. Gradients add up where elements are read several times."""
    offset = _storage_offset_method(x) if storage_offset is None else int(storage_offset)
    attrs = {"size": tuple(int(s) for s in size), "stride": tuple(int(s) for s in stride),
             "storage_offset": offset, "in_stride": tuple(x.stride()),
             "in_offset": _storage_offset_method(x)}
    return apply(_as_strided, [x], attrs)[0]


_storage_offset_method = storage_offset


# ---- in-place view changes -----------------------------------------------------------------------

def _become(self: Tensor, r: Tensor) -> Tensor:
    """Make ``self`` the tensor ``r`` (a view of it): OneFlow's in-place shape methods."""
    if r is self:
        return self
    if self.requires_grad and self.grad_fn is None and r.grad_fn is not None:
        raise RuntimeError("a leaf tensor that requires grad is being used in an in-place "
                           f"shape change (shape {tuple(self._shape)})")
    tracer = current_tracer()
    if tracer is not None:  # nn.Graph traces: self keeps aliasing its memory
        lazy_views.note_become(tracer, self, r)
    self._h, self._shape, self._vc = r._h, r._shape, r._vc
    self._vc[0] += 1  # a gradient rule that saved this tensor must not see the new shape
    if r.grad_fn is not None:
        self.grad_fn, self._out_idx = r.grad_fn, r._out_idx
    return self


def squeeze_(self: Tensor, dim=None) -> Tensor:
    """In-place ``squeeze``: this tensor becomes the squeezed view."""
    return _become(self, squeeze(self, dim))


def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """In-place ``unsqueeze``."""
    return _become(self, unsqueeze(self, dim))


def contiguous_(self: Tensor) -> Tensor:
    """In-place ``contiguous``: this tensor's memory becomes contiguous."""
    return _become(self, contiguous(self))


def _as_strided_method(self: Tensor, size, stride, storage_offset=None) -> Tensor:
    return as_strided(self, size, stride, storage_offset)


def as_strided_(self: Tensor, size, stride, storage_offset=None) -> Tensor:
    """In-place ``as_strided``: this tensor becomes the strided view of its memory."""
    return _become(self, as_strided(self, size, stride, storage_offset))


register_tensor_methods({
    "select": select, "hsplit": hsplit, "vsplit": vsplit, "dsplit": dsplit,
    "tensor_split": tensor_split, "repeat_interleave": repeat_interleave,
    "broadcast_like": broadcast_like, "diag": diag, "diagonal": diagonal,
    "as_strided": _as_strided_method, "storage_offset": storage_offset, "squeeze_": squeeze_,
    "unsqueeze_": unsqueeze_, "contiguous_": contiguous_, "as_strided_": as_strided_,
})

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "tensor_split", "hsplit", "vsplit", "dsplit", "select", "meshgrid",
           "broadcast_like", "repeat_interleave", "slice", "slice_update", "diagonal", "diag",
           "as_strided"]
