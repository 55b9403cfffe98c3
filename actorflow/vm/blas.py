"""Stop OpenBLAS's idle threads from spinning on the cores kernels and the caller need.

After each multi-threaded GEMM, OpenBLAS keeps its helper threads busy-waiting for the next
call for 2**28 cycles (about 0.1 s) before they sleep. A training step interleaves GEMMs with
other kernels (elementwise NumPy, which may use the intra-op threads of ``ops/parallel.py``)
and, with the VM, with the caller's Python; on the 2-core machine the spinning thread took the
second core from all of them: process CPU time was twice the wall time, and the GPT example's
eager step took 77-82 ms against 64-71 ms with a short spin (``OPENBLAS_THREAD_TIMEOUT`` 4 to
18, each measured twice in separate processes).

OpenBLAS reads ``OPENBLAS_THREAD_TIMEOUT`` (the spin, as a power of two of cycles) when it starts
its threads, which NumPy's import has already done. So at import this module sets the variable
for a moment, has OpenBLAS re-read its environment and restarts its thread pool (same thread
count), then restores the environment. It does nothing when the user set
``OPENBLAS_THREAD_TIMEOUT`` themselves, when no OpenBLAS with those entry points is loaded
(NumPy's bundled ``scipy_openblas`` and system OpenBLAS builds export them), or with
``ACTORFLOW_BLAS_TUNING=0``. Linux only (the library is found in ``/proc/self/maps``).
"""
from __future__ import annotations

import ctypes
import os

from actorflow.settings import env_flag

TUNING_VAR = "ACTORFLOW_BLAS_TUNING"
TIMEOUT_VAR = "OPENBLAS_THREAD_TIMEOUT"
SPIN_LOG2_CYCLES = 14  # about 6 µs of spinning before an idle BLAS thread sleeps

applied = False


def _loaded_openblas() -> ctypes.CDLL | None:
    """The OpenBLAS library this process loaded (NumPy's), if its pool can be restarted."""
    import numpy  # noqa: F401  (loads NumPy's BLAS if nothing did yet)
    try:
        with open("/proc/self/maps") as f:
            fields = [line.split(maxsplit=5) for line in f]
    except OSError:
        return None
    paths = {parts[5].strip() for parts in fields if len(parts) == 6}
    for path in sorted(p for p in paths if "openblas" in os.path.basename(p).lower()):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if all(hasattr(lib, name) for name in
               ("openblas_read_env", "blas_thread_shutdown_", "blas_thread_init")):
            return lib
    return None


def shorten_blas_spin() -> bool:
    """Restart OpenBLAS's threads with a short idle spin (see the module docstring); True if
    applied."""
    global applied
    if applied:
        return True
    if not env_flag(TUNING_VAR, True) or TIMEOUT_VAR in os.environ:
        return False
    lib = _loaded_openblas()
    if lib is None:
        return False
    os.environ[TIMEOUT_VAR] = str(SPIN_LOG2_CYCLES)
    try:
        lib.openblas_read_env()
    finally:
        del os.environ[TIMEOUT_VAR]
    lib.blas_thread_shutdown_()
    lib.blas_thread_init()
    applied = True
    return True
