"""Shape functional API (reshape, view, permute, squeeze, flatten, cat, split, ...) and Tensor
methods. squeeze/unsqueeze/flatten/unflatten are reshapes, so they are views in eager mode."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.ops._common import F, norm_axis
from actorflow.ops.registry import OpError, fail
from actorflow.ops.shape import infer_reshape, perm_swapping, view_strides
from actorflow.tensor import Size, Tensor, register_tensor_methods

_reshape = registry.get("reshape")
_transpose = registry.get("transpose")
_narrow = registry.get("narrow")
_cat = registry.get("cat")
_split = registry.get("split")
_repeat = registry.get("repeat")


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def reshape(x: Tensor, *shape, **kwargs) -> Tensor:
    """Same values in a new shape (one dim may be -1). A view of ``x`` when possible. The shape
    may also be given as ``shape=`` (``flow.reshape(x, shape=[-1])``)."""
    if kwargs:
        if set(kwargs) != {"shape"} or shape:
            bad = sorted(set(kwargs) - {"shape"}) or ["shape"]
            raise TypeError(f"reshape() got an unexpected keyword argument {bad[0]!r}"
                            if set(kwargs) != {"shape"} else
                            "reshape() got the shape both positionally and as shape=")
        shape = (kwargs["shape"],)
    shape = _shape_args(shape)
    if shape == tuple(x._shape):
        return x
    return apply(_reshape, [x], {"shape": shape})[0]


def view(x: Tensor, *shape, size=None) -> Tensor:
    """``x``'s memory read in a new shape (one dim may be -1; also ``size=``): always shares
    memory with ``x`` (writes through either reach the other). Raises when the strides of a
    non-contiguous ``x`` don't allow that shape (PyTorch's rule); ``reshape`` copies then."""
    shape = _shape_args(_positional_or_keyword("view", shape, "size", size))
    if not x.is_contiguous():  # eager tensors only: lazy ones have no memory layout yet
        _check_viewable("view", x, shape)
    return reshape(x, shape)


def _check_viewable(name: str, x: Tensor, shape: tuple) -> None:
    target = infer_reshape(name, tuple(x._shape), shape) if -1 in shape else shape
    if view_strides(tuple(x._shape), x.stride(), target) is None:
        raise OpError(f"{name}: shape {target} is not compatible with the input's shape "
                      f"{tuple(x._shape)} and strides {x.stride()} (a new dim would span "
                      f"memory that isn't contiguous); use .reshape(...), which copies, or "
                      f".contiguous() first")


def view_as(x: Tensor, other: Tensor) -> Tensor:
    """``x`` viewed with ``other``'s shape (see ``view``)."""
    return view(x, tuple(other._shape))


def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """``x`` reshaped to ``other``'s shape."""
    return reshape(x, tuple(other._shape))


def reshape_like(x: Tensor, like: Tensor) -> Tensor:
    """``x`` reshaped to ``like``'s shape (OneFlow's ``flow._C.reshape_like``; only the shape
    of ``like`` is read, so it may be laid out differently from ``x``)."""
    return reshape(x, tuple(like._shape))


def _positional_or_keyword(name: str, args: tuple, key: str, value) -> tuple:
    """``args``, or ``(value,)`` when the sequence came as keyword ``key`` (not both)."""
    if value is None:
        return args
    if args:
        raise TypeError(f"{name}() got {key} both positionally and as {key}=")
    return (value,)


def permute(x: Tensor, *dims, **kwargs) -> Tensor:
    """Reorder dimensions (also ``dims=``)."""
    if set(kwargs) - {"dims"}:
        raise TypeError(f"permute() got an unexpected keyword argument "
                        f"{sorted(set(kwargs) - {'dims'})[0]!r}")
    dims = _shape_args(_positional_or_keyword("permute", dims, "dims", kwargs.get("dims")))
    if len(dims) != len(x._shape):
        fail("permute", f"number of dims in {dims} doesn't match the input's {len(x._shape)}",
             x._shape)
    perm = [norm_axis("permute", d, len(x._shape)) for d in dims]
    return apply(_transpose, [x], {"perm": perm})[0]


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions."""
    return apply(_transpose, [x], {"perm": perm_swapping(len(x._shape), dim0, dim1)})[0]


swapaxes = transpose
swapdims = transpose


def t(x: Tensor) -> Tensor:
    """Transpose of a matrix; 0-D and 1-D tensors come back unchanged."""
    if len(x._shape) > 2:
        fail("t", f"expects a tensor with <= 2 dimensions, but it has {len(x._shape)}", x._shape)
    return x if len(x._shape) < 2 else transpose(x, 0, 1)


def movedim(x: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (ints or sequences of ints)."""
    n = len(x._shape)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        fail("movedim", f"source {tuple(src)} and destination {tuple(dst)} must have the same "
             "number of dims", x._shape)
    src = [norm_axis("movedim", d, n) for d in src]
    dst = [norm_axis("movedim", d, n) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        fail("movedim", "repeated dim in source or destination", x._shape)
    perm = [None] * n
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(n) if d not in src)
    perm = [p if p is not None else next(rest) for p in perm]
    return apply(_transpose, [x], {"perm": perm})[0]


def _T(self: Tensor) -> Tensor:
    return permute(self, list(range(self.ndim))[::-1])


# ---- adding and removing dims -------------------------------------------------------------------

def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one (a 0-d tensor becomes shape (1,))."""
    shape = tuple(x._shape)
    if not shape:
        return reshape(x, (1,))
    s = norm_axis("flatten", start_dim, len(shape))
    e = norm_axis("flatten", end_dim, len(shape))
    if s > e:
        fail("flatten", f"start_dim ({start_dim}) comes after end_dim ({end_dim})", shape)
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return reshape(x, shape[:s] + (n,) + shape[e + 1:])


def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one may be -1)."""
    d = norm_axis("unflatten", dim, len(x._shape))
    return reshape(x, tuple(x._shape[:d]) + tuple(int(s) for s in sizes)
                   + tuple(x._shape[d + 1:]))


def squeeze(x: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (only those in ``dim``, an int or tuple, when given)."""
    shape = tuple(x._shape)
    if dim is None:
        drop = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        drop = {d for d in (norm_axis("squeeze", d, len(shape)) for d in dims)
                if shape and shape[d] == 1}
    return reshape(x, tuple(s for i, s in enumerate(shape) if i not in drop))


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (``-1`` appends)."""
    shape = tuple(x._shape)
    d = norm_axis("unsqueeze", dim, len(shape) + 1)
    return reshape(x, shape[:d] + (1,) + shape[d:])


# ---- slicing, joining, splitting -----------------------------------------------------------------

def narrow(x: Tensor, dim: int, start, length: int) -> Tensor:
    """``length`` entries of ``dim`` from ``start`` (negative counts from the end); a view."""
    if isinstance(start, Tensor):
        start = int(start.item())
    if not x._shape:
        fail("narrow", "cannot narrow a 0-d tensor", x._shape)
    d = norm_axis("narrow", dim, len(x._shape))
    size = x._shape[d]
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for dimension {d} with size "
                         f"{size} (expected a start in [{-size}, {size}]; shape "
                         f"{tuple(x._shape)})")
    if start < 0:
        start += size
    return apply(_narrow, [x], {"dim": dim, "start": int(start), "length": int(length)})[0]


def _tensor_list(name: str, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}: expected a sequence of tensors, got {type(tensors).__name__}")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a sequence of tensors, found "
                            f"{type(t).__name__}")
    return list(tensors)


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate ``tensors`` along ``dim``; dtypes promote as in arithmetic. As in PyTorch,
    1-D empty tensors (shape ``(0,)``) are skipped when the others have another shape."""
    tensors = _tensor_list("cat", tensors)
    kept = [t for t in tensors if tuple(t._shape) != (0,)]
    if kept and len(kept) < len(tensors):
        tensors = kept
    return apply(_cat, tensors, {"dim": int(dim)})[0]


concat = cat
concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Join same-shape tensors along a new dim ``dim``."""
    tensors = _tensor_list("stack", tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    first = tuple(tensors[0]._shape)
    if any(tuple(t._shape) != first for t in tensors):
        fail("stack", "expects each tensor to be equal size", *[t._shape for t in tensors])
    d = norm_axis("stack", dim, len(first) + 1)
    parts = [reshape(t, first[:d] + (1,) + first[d:]) for t in tensors]
    return apply(_cat, parts, {"dim": d})[0]


def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Split ``dim`` into pieces of size ``split_size_or_sections`` (the last may be smaller) or
    into the listed sizes; the pieces are views."""
    if not x._shape:
        fail("split", "cannot split a 0-d tensor", x._shape)
    size = x._shape[norm_axis("split", dim, len(x._shape))]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0 or (step == 0 and size != 0):
            fail("split", f"split size must be positive, got {step} for a dim of size {size}",
                 x._shape)
        sizes = tuple(min(step, size - i) for i in range(0, size, step)) if size else (0,)
    else:
        sizes = tuple(int(s) for s in split_size_or_sections)
    return tuple(apply(_split, [x], {"dim": int(dim), "sizes": sizes}))


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` pieces of equal size (the last may be smaller, and there may be
    fewer pieces when the dim is short)."""
    if chunks <= 0:
        fail("chunk", f"chunks must be positive, got {chunks}", x._shape)
    if not x._shape:
        fail("chunk", "cannot chunk a 0-d tensor", x._shape)
    size = x._shape[norm_axis("chunk", dim, len(x._shape))]
    if size == 0:
        return tuple(apply(_split, [x], {"dim": int(dim), "sizes": (0,) * chunks}))
    return split(x, -(-size // chunks), dim)


def unbind(x: Tensor, dim: int = 0) -> tuple:
    """The slices along ``dim`` with that dim removed."""
    if not x._shape:
        fail("unbind", "cannot unbind a 0-d tensor", x._shape)
    d = norm_axis("unbind", dim, len(x._shape))
    rest = tuple(x._shape[:d]) + tuple(x._shape[d + 1:])
    if x._shape[d] == 0:
        return ()
    pieces = apply(_split, [x], {"dim": d, "sizes": (1,) * x._shape[d]})
    return tuple(reshape(p, rest) for p in pieces)


# ---- repeating -----------------------------------------------------------------------------------

def repeat(x: Tensor, *sizes) -> Tensor:
    """Tile ``x`` ``sizes[i]`` times along each dim (extra leading sizes add dims)."""
    return apply(_repeat, [x], {"repeats": _shape_args(sizes)})[0]


def tile(x: Tensor, dims) -> Tensor:
    """Like ``repeat``, but ``dims`` shorter than ``x.ndim`` are padded with leading ones."""
    dims = _shape_args((dims,) if isinstance(dims, int) else tuple(dims))
    dims = (1,) * (len(x._shape) - len(dims)) + dims
    return apply(_repeat, [x], {"repeats": dims})[0]


def contiguous(x: Tensor) -> Tensor:
    """``x`` when its memory is contiguous, else a contiguous copy (gradients flow back)."""
    return x if x.is_contiguous() else F.clone(x)


def _tile_method(self: Tensor, *dims) -> Tensor:
    return tile(self, _shape_args(dims))


register_tensor_methods({
    "reshape": reshape, "view": view, "view_as": view_as, "reshape_as": reshape_as,
    "permute": permute, "transpose": transpose, "swapaxes": swapaxes, "swapdims": swapdims,
    "t": t, "movedim": movedim, "T": property(_T), "flatten": flatten, "unflatten": unflatten,
    "squeeze": squeeze, "unsqueeze": unsqueeze, "narrow": narrow, "split": split,
    "chunk": chunk, "unbind": unbind, "repeat": repeat, "tile": _tile_method,
    "contiguous": contiguous,
})

__all__ = ["reshape", "view", "view_as", "reshape_as", "permute", "transpose", "swapaxes",
           "swapdims", "t", "movedim", "flatten", "unflatten", "squeeze", "unsqueeze", "narrow",
           "cat", "concat", "concatenate", "stack", "split", "chunk", "unbind", "repeat", "tile",
           "contiguous", "reshape_like"]
