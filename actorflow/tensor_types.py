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

def set_default_tensor_type(tensor_type) -> None:
    """Make a floating typed tensor class's dtype (``flow.DoubleTensor``, or its name such as
    ``"torch.DoubleTensor"``) the default dtype of creation ops."""
    if isinstance(tensor_type, str):
        name = tensor_type.rsplit(".", 1)[-1]
        tensor_type = globals().get(name)
        if not isinstance(tensor_type, _TypedTensorMeta):
            raise TypeError(f"set_default_tensor_type: unknown tensor type {name!r}")
    if not isinstance(tensor_type, _TypedTensorMeta):
        raise TypeError(f"set_default_tensor_type: expected a typed tensor class such as "
                        f"flow.FloatTensor, got {tensor_type!r}")
    dt.set_default_dtype(tensor_type.dtype)


__all__ = ["set_default_tensor_type", "FloatTensor", "DoubleTensor", "HalfTensor",
           "BFloat16Tensor", "LongTensor", "IntTensor", "CharTensor", "ByteTensor", "BoolTensor"]
