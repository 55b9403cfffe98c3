"""OneFlow's batched and n-d indexing: batch_gather and tensor_scatter_nd_update, composites of
gather and setitem (their gradients are those ops' rules)."""
from __future__ import annotations

from actorflow.functional.elementwise import cast, expand
from actorflow.functional.index import (
    _check_values, _index_tensor, gather, getitem_by_spec, setitem_by_spec,
)
from actorflow.functional.shape import reshape
from actorflow.ops._common import broadcast_shapes
from actorflow.tensor import Tensor, register_tensor_methods


def batch_gather(input: Tensor, indices: Tensor) -> Tensor:
    """Gather along the dim after the batch dims: with ``b = indices.ndim - 1`` leading batch
    dims shared by ``input`` and ``indices``, ``out[i.., m, ...] = input[i.., indices[i.., m],
    ...]``; the result has shape ``indices.shape + input.shape[b + 1:]``."""
    indices = _index_tensor(indices)
    xs, ishape = tuple(input._shape), tuple(indices._shape)
    if not ishape or indices.dtype._category != 1:
        raise IndexError(f"batch_gather: indices must be an integer tensor of at least 1 dim, "
                         f"got shape {ishape} and dtype {indices.dtype}")
    b = len(ishape) - 1
    if len(xs) <= b or xs[:b] != ishape[:b]:
        raise IndexError(f"batch_gather: the leading (batch) dims of indices {ishape[:b]} must "
                         f"match those of the input (input shape {xs}, indices shape {ishape})")
    _check_values("batch_gather", indices, xs[b], b, xs)
    rest = xs[b + 1:]
    index = reshape(indices, ishape + (1,) * len(rest))
    if rest:
        index = expand(index, ishape + rest)
    return gather(input, b, index)


def tensor_scatter_nd_update(tensor: Tensor, indices: Tensor, updates: Tensor,
                             inplace: bool = False) -> Tensor:
    """A copy of ``tensor`` (``inplace``: ``tensor`` itself) whose elements (or slices) at
    ``indices[..., :k]`` (k = ``indices.shape[-1]`` leading dims) are replaced by ``updates``,
    of shape ``indices.shape[:-1] + tensor.shape[k:]``."""
    indices = _index_tensor(indices)
    xs, ishape = tuple(tensor._shape), tuple(indices._shape)
    if not ishape or indices.dtype._category != 1:
        raise IndexError(f"tensor_scatter_nd_update: indices must be an integer tensor of at "
                         f"least 1 dim, got shape {ishape} and dtype {indices.dtype}")
    k = ishape[-1]
    if not 1 <= k <= len(xs):
        raise IndexError(f"tensor_scatter_nd_update: the last dim of indices ({k}) must be "
                         f"between 1 and the number of dims of the tensor (tensor shape {xs}, "
                         f"indices shape {ishape})")
    want = ishape[:-1] + xs[k:]
    if tuple(updates._shape) != want:
        raise ValueError(f"tensor_scatter_nd_update: updates must have shape {want} (tensor "
                         f"shape {xs}, indices shape {ishape}, updates shape "
                         f"{tuple(updates._shape)})")
    cols = [getitem_by_spec(indices, (("ellipsis",), ("int", i))) for i in range(k)]
    for i, c in enumerate(cols):
        _check_values("tensor_scatter_nd_update", c, xs[i], i, xs)
    if updates.dtype is not tensor.dtype:
        updates = cast(updates, tensor.dtype)
    entries = tuple(("tensor", i) for i in range(k))
    if inplace:
        tensor[tuple(cols)] = updates
        return tensor
    return setitem_by_spec(tensor, entries, cols, updates)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with ``input`` and ``indices`` broadcast against each other except along
    ``dim``; with ``dim=None`` both are flattened first."""
    indices = _index_tensor(indices)
    if dim is None:
        return gather(reshape(input, (-1,)), 0, reshape(indices, (-1,)))
    xs, ishape = tuple(input._shape), tuple(indices._shape)
    if len(xs) != len(ishape):
        raise IndexError(f"take_along_dim: input and indices must have the same number of dims "
                         f"(input shape {xs}, indices shape {ishape})")
    nd = len(xs)
    d = dim % nd if nd else 0
    if not -max(nd, 1) <= dim < max(nd, 1):
        raise IndexError(f"take_along_dim: dim {dim} is out of range for a tensor of {nd} dims")
    shape = broadcast_shapes("take_along_dim", xs[:d] + xs[d + 1:], ishape[:d] + ishape[d + 1:])
    x_to = shape[:d] + xs[d:d + 1] + shape[d:]
    i_to = shape[:d] + ishape[d:d + 1] + shape[d:]
    if x_to != xs:
        input = expand(input, x_to)
    if i_to != ishape:
        indices = expand(indices, i_to)
    return gather(input, d, indices)


register_tensor_methods({"take_along_dim": take_along_dim})

__all__ = ["batch_gather", "tensor_scatter_nd_update", "take_along_dim"]
