"""Legacy typed tensor constructors (``flow.FloatTensor``, ``flow.LongTensor``, ...).

Each is callable like ``flow.Tensor`` (data or a shape) with its dtype fixed, and works with
``isinstance`` (true for tensors of that dtype).
"""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor


class _TypedTensorMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args, **kwargs):
        if "dtype" in kwargs:
            raise TypeError(f"{cls.__name__}: dtype is fixed to {cls.dtype}")
        return Tensor(*args, dtype=cls.dtype, **kwargs)


def _make(name: str, d: dt.dtype):
    return _TypedTensorMeta(name, (), {"dtype": d, "__doc__": f"Tensors of dtype {d}."})


FloatTensor = _make("FloatTensor", dt.float32)
DoubleTensor = _make("DoubleTensor", dt.float64)
HalfTensor = _make("HalfTensor", dt.float16)
BFloat16Tensor = _make("BFloat16Tensor", dt.bfloat16)
LongTensor = _make("LongTensor", dt.int64)
IntTensor = _make("IntTensor", dt.int32)
CharTensor = _make("CharTensor", dt.int8)
ByteTensor = _make("ByteTensor", dt.uint8)
BoolTensor = _make("BoolTensor", dt.bool_)

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "CharTensor", "ByteTensor", "BoolTensor"]
