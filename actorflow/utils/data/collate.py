"""Turning a list of samples into a batch (``default_collate``) or converting one sample
(``default_convert``, used when automatic batching is off)."""
from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor

_STRINGS = (str, bytes)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _array_dtype(a: np.ndarray) -> dt.dtype:
    if a.dtype.kind in "OSUV":
        raise TypeError(f"default_collate: numpy arrays of dtype {a.dtype} can't become tensors")
    return dt.as_dtype(a.dtype)


def _stack_arrays(arrays: list, d: dt.dtype, what: str) -> Tensor:
    first = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != first:
            raise RuntimeError(f"default_collate: stack expects each {what} to be equal size, "
                               f"but got {list(first)} at entry 0 and {list(a.shape)} at "
                               f"entry {i}")
    out = np.empty((len(arrays),) + first, dtype=d.np)
    for i, a in enumerate(arrays):
        out[i] = a
    return Tensor._wrap(out, d)


def _same_len(batch: list, kind: str) -> None:
    n = len(batch[0])
    for i, e in enumerate(batch):
        if len(e) != n:
            raise RuntimeError(f"default_collate: each element in the batch should be a {kind} "
                               f"of equal size, but entry 0 has {n} items and entry {i} has "
                               f"{len(e)}")


def default_collate(batch):
    """Merge a list of samples into a batch.

    Tensors and NumPy arrays are stacked along a new first dim, Python and NumPy numbers become
    a 1-d tensor (bool, int64, float64), strings stay a list, and dicts, lists, tuples and
    namedtuples are collated field by field. Stacked batches are new tensors outside autograd.
    """
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, _STRINGS) or \
            not batch:
        raise TypeError(f"default_collate: expected a non-empty list of samples, got "
                        f"{type(batch).__name__}")
    elem = batch[0]
    if isinstance(elem, Tensor):
        for i, e in enumerate(batch):
            if not isinstance(e, Tensor):
                raise TypeError(f"default_collate: entry 0 is a Tensor but entry {i} is "
                                f"{type(e).__name__}")
        d = elem.dtype
        for e in batch[1:]:
            d = dt.promote_types(d, e.dtype)
        return _stack_arrays([e._array() for e in batch], d, "tensor")
    if isinstance(elem, np.ndarray):
        arrays = [np.asarray(e) for e in batch]
        d = _array_dtype(arrays[0])
        for a in arrays[1:]:
            d = dt.promote_types(d, _array_dtype(a))
        return _stack_arrays(arrays, d, "numpy array")
    if isinstance(elem, (bool, np.bool_)):
        return Tensor._wrap(np.array(batch, dtype=np.bool_), dt.bool_)
    if isinstance(elem, (numbers.Number, np.number)) and not isinstance(elem, complex):
        values = np.array(batch)
        if values.dtype.kind in "biu":
            d = dt.int64 if isinstance(elem, int) else _array_dtype(values)
        elif values.dtype.kind == "f":
            d = dt.float64 if isinstance(elem, float) else _array_dtype(values)
        else:
            raise TypeError(f"default_collate: can't collate numbers of types "
                            f"{sorted({type(e).__name__ for e in batch})}")
        return Tensor._wrap(values.astype(d.np, copy=False), d)
    if isinstance(elem, _STRINGS):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        keys = list(elem.keys())
        for i, e in enumerate(batch):
            if not isinstance(e, collections.abc.Mapping) or set(e.keys()) != set(keys):
                raise RuntimeError(f"default_collate: entry {i} of the batch does not have the "
                                   f"same keys as entry 0 ({keys})")
        merged = [(k, default_collate([e[k] for e in batch])) for k in keys]
        try:
            return type(elem)(merged)
        except TypeError:  # a mapping type that can't be built from pairs
            return dict(merged)
    if _is_namedtuple(elem):
        _same_len(batch, "namedtuple")
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        _same_len(batch, "sequence")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns  # as in PyTorch, a batch of tuples becomes a list of columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"strings, dicts or sequences; found {type(elem).__name__}")


def default_convert(data):
    """Convert one sample: NumPy arrays become tensors, containers are converted recursively,
    everything else is returned unchanged."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        d = _array_dtype(data)
        return Tensor._wrap(data if data.dtype == d.np else data.astype(d.np), d)
    if isinstance(data, collections.abc.Mapping):
        items = [(k, default_convert(v)) for k, v in data.items()]
        try:
            return type(data)(items)
        except TypeError:
            return dict(items)
    if _is_namedtuple(data):
        return type(data)(*(default_convert(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(v) for v in data)
    return data


__all__ = ["default_collate", "default_convert"]
