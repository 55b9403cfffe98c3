"""``oneflow._utils`` (PyTorch's ``torch._utils``): flatten a list of tensors into one 1-d
tensor and split it back, as bucketed communication does."""
from __future__ import annotations

from typing import Sequence

from actorflow.functional import cat, split
from actorflow.tensor import Tensor

__all__ = ["_flatten_dense_tensors", "_unflatten_dense_tensors"]


def _flatten_dense_tensors(tensors: Sequence[Tensor]) -> Tensor:
    """The tensors' values, each flattened, one after the other in one 1-d tensor."""
    tensors = list(tensors)
    if len(tensors) == 1:
        return tensors[0].reshape(-1)
    return cat([t.reshape(-1) for t in tensors], dim=0)


def _unflatten_dense_tensors(flat: Tensor, tensors: Sequence[Tensor]) -> tuple:
    """``flat`` cut into views shaped like ``tensors`` (the inverse of the above)."""
    tensors = list(tensors)
    sizes = [t.numel() for t in tensors]
    if sum(sizes) != flat.numel():
        raise ValueError(f"_unflatten_dense_tensors: flat has {flat.numel()} elements, the "
                         f"tensors {sum(sizes)}")
    return tuple(p.view(*t.shape) for p, t in zip(split(flat.reshape(-1), sizes), tensors))
