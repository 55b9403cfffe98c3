"""Python integers meeting integer tensors, as PyTorch treats them.

A Python int meeting an integer tensor in arithmetic or a comparison acts in the tensor's dtype,
wrapped modulo 2**bits as PyTorch casts it (uint8: 300 -> 44, -1 -> 255); NumPy 2 would refuse
it. fill / masked_fill / full values, clamp bounds and pow's exponent must instead be
representable, as in PyTorch. Float and bool tensors are left alone.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt


def is_int_scalar(value) -> bool:
    """A Python or NumPy integer (not a bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


_INT_RANGE = {c: (int(np.iinfo(c).min), int(np.iinfo(c).max))  # by type char: a quick lookup
              for c in np.typecodes["AllInteger"]}


def check_int_scalar(op_name: str, value, dtype: dt.dtype, exact: bool = False) -> None:
    """Inference check of a scalar acting on the integer ``dtype``: an integral one must fit in
    64 bits (PyTorch's limit). With ``exact`` the value must be representable in ``dtype``
    (unsigned types also take ints down to -max, which wrap) and floats must be in range."""
    if dtype._category != 1 or isinstance(value, (bool, np.bool_)):
        return
    if is_int_scalar(value):
        value = int(value)
        if not -(1 << 63) <= value < (1 << 64):
            raise OverflowError(f"{op_name}: the integer scalar {value} does not fit in 64 bits")
        if not exact:
            return
    elif not exact or not isinstance(value, (float, np.floating)):
        return
    lo, hi = _INT_RANGE[np.dtype(dtype.np).char]
    if lo == 0 and isinstance(value, int):
        lo = -hi
    if not lo <= value <= hi:  # False for NaN
        raise OverflowError(f"{op_name}: the value {value!r} cannot be converted to {dtype} "
                            f"without overflow")


def int_scalar(value, np_dtype: np.dtype):
    """``value`` as the kernels use it on an array of ``np_dtype``: an integral scalar with an
    integer dtype is wrapped into that dtype's range (two's complement); anything else is
    returned unchanged."""
    if type(value) is not int and not is_int_scalar(value):
        return value
    lim = _INT_RANGE.get(np_dtype.char)
    if lim is None:
        return value
    value = int(value)
    if lim[0] <= value <= lim[1]:
        return value
    bits = np_dtype.itemsize * 8
    v = value & ((1 << bits) - 1)
    return v - (1 << bits) if lim[0] < 0 and v > lim[1] else v
