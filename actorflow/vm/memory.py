"""Keep freed tensor memory in the process instead of giving it back to the OS.

Eager execution allocates every op's outputs (and kernels their temporaries) and frees them a
moment later. With glibc's defaults, large blocks are mmap'd and unmapped, and the top of the
heap is trimmed once enough is free, so each training step page-faults its activations back
in (measured on the GPT example: ~25,000 minor faults per step, about half the step time).
When the VM pipelines several steps, more memory is live at once, which changes where the
dynamic thresholds settle and made the asynchronous mode pay those faults where the blocking
mode did not. Fixing the thresholds makes steady-state steps fault-free in both modes, much as
a caching allocator does.

Threads other than the main one (VM workers, actor threads) would each get their own glibc
arena, which the thresholds above don't settle the same way (measured: ~15,600 faults per GPT
step for a graph run on a VM worker); ``M_ARENA_MAX = 1`` makes every thread allocate from the
main arena. The threads' Python work is serialised by the GIL anyway, so the shared arena's lock
costs little.

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every
allocation of 4 MiB or more. Where the kernel's THP defrag setting is ``madvise`` (common), a
fault in such a block may compact memory and zeroes 2 MiB at a time, in the faulting thread:
measured on the MLP benchmark, 10-20 ms of system time per step in one process (5.7 without),
and in two data-parallel processes 40-57 ms per step on the communication worker (12-14 ms
without). Those two-process figures were measured when DDP's bucket reduction still allocated
a 7 MB ``cat`` and a 7 MB quotient per step; it now reuses one flat buffer per bucket
(``nn.parallel.distributed``), so DDP no longer allocates there, but any eager op output of
4 MiB or more still does. ``no_huge_pages`` turns it off (unless ``NUMPY_MADVISE_HUGEPAGE`` is
set: NumPy's own choice stands).

Applied once, at import (the thresholds on glibc only). ``ACTORFLOW_MALLOC_TUNING=0`` leaves
malloc and NumPy's huge pages alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from actorflow.settings import env_flag

TUNING_VAR = "ACTORFLOW_MALLOC_TUNING"
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 * 1024 * 1024   # glibc's maximum on 64-bit: blocks below it come from heaps
TRIM_THRESHOLD = 512 * 1024 * 1024  # free memory kept at the top of a heap before trimming

applied = False


HUGEPAGE_VAR = "NUMPY_MADVISE_HUGEPAGE"


def no_huge_pages() -> bool:
    """Stop NumPy's ``madvise(MADV_HUGEPAGE)`` on large arrays (see the module docstring);
    True if done. Leaves it when ``NUMPY_MADVISE_HUGEPAGE`` is set or the tuning is off."""
    if os.environ.get(HUGEPAGE_VAR) is not None or not env_flag(TUNING_VAR, True):
        return False
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:
        try:
            from numpy.core.multiarray import _set_madvise_hugepage
        except ImportError:  # a NumPy without the switch
            return False
    _set_madvise_hugepage(False)
    return True


def tune_malloc() -> bool:
    """Set glibc's mmap and trim thresholds (see the module docstring); True if applied."""
    global applied
    if applied:
        return True
    if not env_flag(TUNING_VAR, True):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt thresholds)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    ok = mallopt(_M_ARENA_MAX, 1) == 1 and ok
    applied = ok
    return ok
