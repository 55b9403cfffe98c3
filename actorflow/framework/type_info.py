"""``flow.finfo`` and ``flow.iinfo``: the numeric limits of a floating or integer dtype (as
PyTorch's and OneFlow's: ``bits``, ``max``, ``min``, and for floats ``eps``, ``tiny`` =
``smallest_normal``, ``resolution``), read from NumPy / ml_dtypes."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt

__all__ = ["finfo", "iinfo"]


def numpy_finfo(nd: np.dtype):
    """NumPy's finfo for ``nd``, ml_dtypes' for bfloat16 (NumPy does not know it)."""
    if nd.name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(nd)
    return np.finfo(nd)


class finfo:  # noqa: N801  (PyTorch's name)
    """Limits of a floating-point dtype (the default dtype when none is given)."""

    def __init__(self, type: dt.dtype | None = None) -> None:  # noqa: A002
        d = dt.get_default_dtype() if type is None else type
        if not isinstance(d, dt.dtype) or not (d.is_floating_point or d.is_complex):
            raise TypeError(f"finfo: expects a floating point dtype, got {d}")
        info = numpy_finfo(d.np)
        self.dtype = d.name
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        self.resolution = 10.0 ** -int(info.precision)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.smallest_normal}, tiny={self.tiny}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801  (PyTorch's name)
    """Limits of an integer dtype."""

    def __init__(self, type: dt.dtype) -> None:  # noqa: A002
        if not isinstance(type, dt.dtype) or type._category != 1:
            raise TypeError(f"iinfo: expects an integer dtype, got {type}")
        info = np.iinfo(type.np)
        self.dtype = type.name
        self.bits = int(info.bits)
        self.max = int(info.max)
        self.min = int(info.min)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
