"""``TensorBuffer``: a batch of arrays whose shapes may differ, what OneFlow's data pipeline
passes between its readers, decoders and image ops.

OneFlow stores such a batch as a tensor of dtype ``tensor_buffer`` and shape ``(N,)``, one
buffer (shape, dtype, bytes) per element. Here it is a plain host-side container of ``N``
NumPy arrays, not a ``Tensor``: the image and record ops that take and return it run on the
host eagerly (their output shapes depend on the data), and ``numpy()`` returns the list of
arrays, as OneFlow's ``Tensor.numpy()`` does for a tensor buffer.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.functional.creation import tensor as _tensor
from actorflow.tensor import Tensor

__all__ = ["TensorBuffer", "tensor_to_tensor_buffer", "tensor_buffer_to_tensor",
           "tensor_buffer_to_list_of_tensors", "gen_tensor_buffer", "as_instances"]


class TensorBuffer:
    """``N`` arrays (the instances), each with its own shape; dtype ``tensor_buffer``.

    ``shape`` is ``(N,)``, or the leading shape ``tensor_to_tensor_buffer`` kept (its product
    is ``N``); ``buffer[i]`` is instance ``i`` in row-major order (a NumPy array, not a
    copy); ``numpy()`` is the list of instances (copies); ``instance_shapes`` and
    ``instance_dtypes`` describe them."""

    __slots__ = ("_items", "_shape")
    dtype = "tensor_buffer"

    def __init__(self, items: Sequence, shape: Sequence[int] | None = None) -> None:
        self._items = tuple(np.asarray(a) for a in items)
        self._shape = (len(self._items),) if shape is None else tuple(int(s) for s in shape)
        if int(np.prod(self._shape)) != len(self._items):
            raise ValueError(f"TensorBuffer: shape {self._shape} does not hold "
                             f"{len(self._items)} instances")

    @property
    def shape(self) -> tuple:
        return self._shape

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> np.ndarray:
        return self._items[i]

    def __iter__(self):
        return iter(self._items)

    @property
    def instance_shapes(self) -> list:
        return [tuple(a.shape) for a in self._items]

    @property
    def instance_dtypes(self) -> list:
        return [dt.from_numpy_dtype(a.dtype) for a in self._items]

    def numpy(self) -> list:
        """The instances, as a list of NumPy arrays (copies)."""
        return [a.copy() for a in self._items]

    def __repr__(self) -> str:
        shapes = ", ".join(str(s) for s in self.instance_shapes[:4])
        more = ", ..." if len(self) > 4 else ""
        return f"TensorBuffer(shape={self._shape}, instances=[{shapes}{more}])"


def as_instances(x, who: str) -> list:
    """The instances of ``x``: a ``TensorBuffer``, a list of arrays or tensors, or a tensor
    whose first dim is the batch (each slice one instance)."""
    if isinstance(x, TensorBuffer):
        return list(x)
    if isinstance(x, Tensor):
        if x.is_lazy:
            raise RuntimeError(f"{who} runs on the host, eagerly (its output shapes depend on "
                               f"the data); it cannot be traced into an nn.Graph")
        a = x.numpy()
        if a.ndim == 0:
            raise ValueError(f"{who}: a batch tensor needs a batch dim, got shape ()")
        return list(a)
    if isinstance(x, (list, tuple)):
        return [t.numpy() if isinstance(t, Tensor) else np.asarray(t) for t in x]
    raise TypeError(f"{who}: expected a TensorBuffer, a batch tensor or a list of arrays, got "
                    f"{type(x).__name__}")


def tensor_to_tensor_buffer(x: Tensor, instance_dims: int) -> TensorBuffer:
    """The tensor buffer whose instances are ``x``'s trailing ``instance_dims`` dims: a
    tensor of shape ``(a, b, *inst)`` gives a buffer of shape ``(a, b)`` holding instances of
    shape ``inst``."""
    a = x.numpy()
    if not 0 < instance_dims < a.ndim:
        raise ValueError(f"tensor_to_tensor_buffer: instance_dims must be in [1, {a.ndim - 1}] "
                         f"for a tensor of shape {tuple(a.shape)}, got {instance_dims}")
    inst = a.shape[a.ndim - instance_dims:]
    return TensorBuffer(list(a.reshape((-1,) + inst).copy()),
                        a.shape[:a.ndim - instance_dims])


def tensor_buffer_to_tensor(x: TensorBuffer, dtype: dt.dtype, instance_shape) -> Tensor:
    """The tensor ``(*x.shape, *instance_shape)`` of ``dtype`` stacking the instances of
    ``x`` (each must have ``instance_shape``'s element count)."""
    shape = tuple(int(s) for s in instance_shape)
    n_el = int(np.prod(shape))
    out = np.empty((len(x),) + shape, dtype=dtype.np)
    for i, a in enumerate(x):
        if a.size != n_el:
            raise ValueError(f"tensor_buffer_to_tensor: instance {i} has shape {a.shape}, not "
                             f"{n_el} elements of instance_shape {shape}")
        out[i] = a.reshape(shape)
    return _tensor(out.reshape(x.shape + shape), dtype=dtype)


def tensor_buffer_to_list_of_tensors(x: TensorBuffer, out_shapes=None, out_dtypes=None,
                                     dynamic_out: bool = False) -> list:
    """One tensor per instance of ``x``, cast to ``out_dtypes[i]`` when given (the shapes
    are the instances' own; ``out_shapes``, OneFlow's static bound, is checked when given)."""
    out = []
    for i, a in enumerate(x):
        if out_shapes is not None and not dynamic_out:
            bound = tuple(out_shapes[min(i, len(out_shapes) - 1)])
            if len(bound) != a.ndim or any(s > b for s, b in zip(a.shape, bound)):
                raise ValueError(f"tensor_buffer_to_list_of_tensors: instance {i} of shape "
                                 f"{a.shape} exceeds out_shape {bound}")
        d = None if out_dtypes is None else out_dtypes[min(i, len(out_dtypes) - 1)]
        out.append(_tensor(a if d is None else a.astype(d.np), dtype=d))
    return out


def gen_tensor_buffer(shape, shape_list, value_list, data_type: dt.dtype = dt.float32,
                      dynamic_out: bool = False) -> TensorBuffer:
    """A tensor buffer of ``prod(shape)`` instances: instance ``i`` has shape
    ``shape_list[i]`` and every element ``value_list[i]``."""
    n = int(np.prod(shape))
    if len(shape_list) != n or len(value_list) != n:
        raise ValueError(f"gen_tensor_buffer: shape {tuple(shape)} holds {n} instances, got "
                         f"{len(shape_list)} shapes and {len(value_list)} values")
    return TensorBuffer([np.full(tuple(s), v, dtype=data_type.np)
                         for s, v in zip(shape_list, value_list)], shape)
