"""JSON encoding of op attrs: the values ops take (numbers, strings, tuples, slices, dtypes,
constant arrays) to plain JSON and back, so a Job loads back equal to the one that was saved."""
from __future__ import annotations

import base64

import numpy as np

from actorflow.framework import dtype as dt


def encode(value):
    """A JSON-compatible form of an attr value; raises TypeError for values a Job can't hold."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"attr dicts need string keys, got {list(value)}")
        return {"__dict__": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, slice):
        return {"__slice__": [encode(value.start), encode(value.stop), encode(value.step)]}
    if value is Ellipsis:
        return {"__ellipsis__": True}
    if isinstance(value, dt.dtype):
        return {"__dtype__": value.name}
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return {"__ndarray__": base64.b64encode(arr.tobytes()).decode("ascii"),
                "dtype": _dtype_name(arr), "shape": list(arr.shape)}
    raise TypeError(f"an attr of type {type(value).__name__} can't be stored in a Job ({value!r})")


def decode(value):
    """Inverse of ``encode``."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tuple__" in value:
        return tuple(decode(v) for v in value["__tuple__"])
    if "__dict__" in value:
        return {k: decode(v) for k, v in value["__dict__"].items()}
    if "__slice__" in value:
        return slice(*(decode(v) for v in value["__slice__"]))
    if "__ellipsis__" in value:
        return Ellipsis
    if "__dtype__" in value:
        return dt.as_dtype(value["__dtype__"])
    if "__ndarray__" in value:
        d = dt.as_dtype(value["dtype"]).np
        raw = base64.b64decode(value["__ndarray__"])
        return np.frombuffer(raw, dtype=d).reshape(value["shape"]).copy()
    raise ValueError(f"unknown encoded attr {value!r}")


def _dtype_name(arr: np.ndarray) -> str:
    return dt.from_numpy_dtype(arr.dtype).name
