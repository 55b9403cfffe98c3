"""How many threads BLAS may use while VM kernels overlap the caller's Python.

In asynchronous mode the caller's thread keeps issuing ops (Python: inference, autograd,
allocation) while a worker thread runs kernels. A BLAS call on the worker splits its work over
all of BLAS's threads; with one of the cores busy with the caller's Python, one part of each
GEMM waits for a core and the whole call waits for that part, and BLAS's idle threads spin on
the core the caller needs. Measured on the 2-core machine with the GPT example, async steps were
no faster than blocking ones.

So the worker narrows BLAS to ``full - 1`` threads (at least 1) for an instruction it runs
while no user thread is waiting for the VM, and gives BLAS all of them back when a user thread
starts waiting (a sync point: the caller's core is free) or the worker runs out of work.
Setting the count is a global variable write in OpenBLAS (under a microsecond); a GEMM reads it
when it starts.

Only OpenBLAS is driven (NumPy's wheels bundle it as ``scipy_openblas``; distributions link the
system ``libopenblas``), found among the libraries this process has loaded. With another BLAS,
or with ``ACTORFLOW_VM_ADAPTIVE_BLAS=0``, the thread count is left alone.
"""
from __future__ import annotations

import ctypes
import os
import threading

ADAPTIVE_VAR = "ACTORFLOW_VM_ADAPTIVE_BLAS"

# (setter, getter) symbol names: NumPy's bundled scipy-openblas (64-bit and 32-bit ints),
# then plain OpenBLAS
_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))


def _loaded_openblas_paths() -> list:
    """Paths of the OpenBLAS libraries mapped into this process (Linux: /proc/self/maps)."""
    import numpy  # noqa: F401  (loads NumPy's BLAS, if it was not loaded yet)
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        name = os.path.basename(path).lower()
        if "openblas" in name and ".so" in name and path not in paths:
            paths.append(path)
    return paths


class BlasThreads:
    """The process's OpenBLAS thread count, with the VM's narrow / full switch."""

    def __init__(self):
        self._set = self._get = None
        for path in _loaded_openblas_paths():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for set_name, get_name in _SYMBOLS:
                setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
                if setter is not None and getter is not None:
                    setter.argtypes, setter.restype = (ctypes.c_int,), None
                    getter.argtypes, getter.restype = (), ctypes.c_int
                    self._set, self._get = setter, getter
                    break
            if self._set is not None:
                break
        self.full = self._get() if self._get is not None else 1
        self.narrow = max(1, self.full - 1)
        self.current = self.full
        self._lock = threading.Lock()
        self.enabled = self._set is not None and self.full > 1 and \
            os.environ.get(ADAPTIVE_VAR, "1").strip().lower() not in ("0", "false", "no", "off")

    @property
    def available(self) -> bool:
        """Whether an OpenBLAS whose thread count can be set was found."""
        return self._set is not None

    def get(self) -> int:
        """OpenBLAS's current thread count (1 when no OpenBLAS was found)."""
        return self._get() if self._get is not None else 1

    def use(self, narrow: bool) -> None:
        """Narrow BLAS to ``full - 1`` threads, or give it all ``full`` back."""
        if not self.enabled:
            return
        want = self.narrow if narrow else self.full
        if want != self.current:
            with self._lock:
                self._set(want)
                self.current = want

    def set_full(self, n: int) -> None:
        """Change the full thread count (and apply it); ``n`` >= 1."""
        if n < 1:
            raise ValueError(f"BLAS thread count must be >= 1, got {n}")
        if self._set is None:
            raise RuntimeError("no OpenBLAS found in this process; its thread count can't be set")
        with self._lock:
            self.full, self.narrow = n, max(1, n - 1)
            self._set(n)
            self.current = n
        self.enabled = n > 1 and \
            os.environ.get(ADAPTIVE_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


blas_threads = BlasThreads()
