"""``flow.set_num_threads`` / ``flow.get_num_threads``: how many threads one CPU kernel uses.

Two pools do intra-op work here: actorflow's own helpers for large elementwise kernels
(``actorflow.ops.parallel``, sized by ``ACTORFLOW_INTRA_OP_THREADS``) and the BLAS library
NumPy loaded (OpenBLAS: matmul, conv). ``set_num_threads(n)`` sets both; ``get_num_threads()``
answers actorflow's count (the BLAS count is ``blas_threads()``, None when no OpenBLAS with a
thread-count entry point is loaded, in which case only actorflow's pool is set).
"""
from __future__ import annotations

import ctypes
import os

from actorflow.ops import parallel

__all__ = ["set_num_threads", "get_num_threads", "blas_threads"]

_SET = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
        "scipy_openblas_set_num_threads")
_GET = ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_",
        "scipy_openblas_get_num_threads")
_blas: list = []  # [(setter, getter)] once looked up (empty tuple entry: none found)


def _blas_entry_points():
    if _blas:
        return _blas[0]
    found = None
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split(maxsplit=5)[5].strip() for line in f
                            if len(line.split(maxsplit=5)) == 6})
    except OSError:
        paths = []
    for path in paths:
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SET if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GET if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            found = (setter, getter)
            break
    _blas.append(found)
    return found


def blas_threads() -> int | None:
    """The thread count of the loaded OpenBLAS, or None when none could be found."""
    entry = _blas_entry_points()
    return None if entry is None else int(entry[1]())


def set_num_threads(num: int) -> None:
    """Use at most ``num`` threads in each CPU kernel: actorflow's intra-op pool and
    OpenBLAS's pool."""
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {num!r}")
    parallel.set_threads(num)
    entry = _blas_entry_points()
    if entry is not None:
        entry[0](num)


def get_num_threads() -> int:
    """The number of threads one CPU kernel may use (``set_num_threads``)."""
    return parallel.threads()
