"""Build one C translation unit into a shared object with the system C compiler, cache it on
disk, and load it with ``ctypes``.

The compiler is ``$CC`` (default ``cc``). Flags, and why each:

* ``-O2``: optimised code at a third of ``-O3``'s compile time (measured: 20 kernels 3.1 s
  against 8.0 s on the loaded 2-core machine); the unit-stride row loops, where vectorisation
  pays, ask for it themselves (``optimize("tree-vectorize")`` on the row function, ``emit.py``),
  and the strided fallback loops are left scalar;
* ``-march=native``: the vector width and instructions of this CPU (AVX2, FMA, F16C for
  float16 loads and stores); the cache key holds the flags and the compiler, and the cache is
  per machine, so a library built for one CPU is never loaded on another by accident -
  unless a cache directory is shared between different machines, which it must not be;
* ``-mprefer-vector-width=512`` on x86 CPUs with AVX-512 (``avx512f`` in ``/proc/cpuinfo``),
  else ``-mprefer-vector-width=256`` (x86 only; other CPUs' compilers don't know it). GCC's
  default tunings prefer 256-bit vectors on AVX-512 CPUs (wide vectors lower the clock of
  some Intel parts) and 128-bit on some AVX2 ones (GCC 12 calls the 2-core AMD EPYC AVX2
  machine ``znver1``). Measured, one thread: on that AVX2 machine gelu over 1024 x 512 took
  2.71 ms with 128-bit vectors and 1.93 with 256; on the 2-core AMD EPYC Zen 4 (AVX-512)
  0.58 ms with 256 and 0.41 with 512. NumPy's OpenBLAS already runs AVX-512 GEMMs on such
  CPUs, so wide vectors here cost no clock the step was not already paying. Vector width never
  changes an element's result, only the order of the sums a row form lets ``omp simd``
  reorder;
* ``-ffp-contract=off``: no fused multiply-add contraction of ``a * b + c``. GCC contracts by
  default in GNU C mode, which rounds once where NumPy rounds twice; off, the arithmetic of a
  generated kernel gives the NumPy kernels' bits;
* ``-fno-math-errno``: libm calls need not set ``errno``, so ``sqrt`` becomes one instruction
  and pure math calls can be hoisted. Results, NaN and inf are unchanged (nothing here reads
  ``errno``);
* ``-fno-trapping-math``: the kernels never read the floating-point exception flags, so the
  compiler may turn a ``?:`` on floats into a vector select (without it, a loop with one is
  not vectorised); results, NaN and inf included, are unchanged;
* ``-fopenmp-simd``: honours ``#pragma omp simd reduction(+:s)`` in row kernels (``rows.py``),
  which lets just those sums be vectorised in another order (an op's row form says where);
  no OpenMP runtime, no threads, nothing else reordered;
* ``-fPIC -shared``: a shared object ``ctypes`` can load;
* ``-std=gnu11``: ``_Float16`` (GCC's half type on x86) and ``<tgmath.h>``.

No ``-ffast-math`` nor any of its parts that change results (``-ffinite-math-only``,
``-fno-signed-zeros``, ``-fassociative-math``, ``-freciprocal-math``): NaN and inf must behave
as in the NumPy kernels.

Cache: ``$ACTORFLOW_KERNEL_CACHE`` or ``~/.cache/actorflow/kernels``; the file name is a
SHA-256 of the source, the compiler's path and ``--version`` line, and the flags. A build
writes a temporary file in the cache directory and renames it into place (atomic on POSIX),
so processes building the same library at once (the ranks of a distributed graph, parallel
test runs) each load a complete file. The cache is bounded: after each build the oldest
libraries (by last use: a cache hit touches its file) are removed until the rest fit in
``$ACTORFLOW_KERNEL_CACHE_MB`` MiB (default 256; the library just built is always kept).

Failures never stop a graph: no compiler, a compile error or a load error return None, and
``build`` warns once per reason (``CodegenWarning``) saying why; the caller then runs the
NumPy kernels.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings

from actorflow.settings import env_int

FLAGS = ("-O2", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
         "-fopenmp-simd", "-fPIC", "-shared", "-std=gnu11")


def _has_avx512() -> bool:
    """Whether this (Linux) CPU reports AVX-512 Foundation."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        pass
    return False


if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
    FLAGS += (f"-mprefer-vector-width={512 if _has_avx512() else 256}",)
CACHE_VAR = "ACTORFLOW_KERNEL_CACHE"
CACHE_MB_VAR = "ACTORFLOW_KERNEL_CACHE_MB"
CACHE_MB_DEFAULT = 256


class CodegenWarning(RuntimeWarning):
    """Generated kernels are unavailable; the graph runs its NumPy kernels."""


_lock = threading.Lock()
_versions: dict = {}     # compiler path -> its --version line
_loaded: dict = {}       # library path -> CDLL (a library is loaded once per process)
_warned: set = set()
stats = {"builds": 0, "cache_hits": 0}  # this process's builds and disk-cache hits


def cache_dir() -> str:
    """Where built libraries are kept."""
    d = os.environ.get(CACHE_VAR, "").strip()
    return d or os.path.join(os.path.expanduser("~"), ".cache", "actorflow", "kernels")


def compiler() -> str:
    """The C compiler command: ``$CC`` or ``cc``."""
    return os.environ.get("CC", "").strip() or "cc"


def _warn_once(reason: str) -> None:
    with _lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(f"actorflow: generated kernels are off ({reason}); the graph runs the NumPy "
                  f"kernels", CodegenWarning, stacklevel=3)


def _version(cc_path: str) -> str | None:
    v = _versions.get(cc_path)
    if v is None:
        try:
            r = subprocess.run([cc_path, "--version"], capture_output=True, text=True,
                               timeout=30)
        except (OSError, subprocess.SubprocessError) as e:
            _warn_once(f"C compiler {cc_path!r} does not run: {e}")
            return None
        v = (r.stdout or r.stderr).splitlines()[0] if (r.stdout or r.stderr) else ""
        _versions[cc_path] = v
    return v


def library_key(source: str, cc_path: str, version: str) -> str:
    """The cache key of a library: source, compiler and flags."""
    h = hashlib.sha256()
    for part in (source, cc_path, version, " ".join(FLAGS)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def build(source: str) -> ctypes.CDLL | None:
    """The loaded library of ``source`` (built, or found in the cache), or None (warned)."""
    cc = compiler()
    cc_path = shutil.which(cc)
    if cc_path is None:
        _warn_once(f"no C compiler: CC={cc!r} is not found")
        return None
    version = _version(cc_path)
    if version is None:
        return None
    directory = cache_dir()
    path = os.path.join(directory, f"af_{library_key(source, cc_path, version)}.so")
    with _lock:
        lib = _loaded.get(path)
    if lib is not None:
        return lib
    if os.path.exists(path):
        stats["cache_hits"] += 1
        try:
            os.utime(path)  # last use, for the cache bound
        except OSError:
            pass
    elif not _compile(source, cc_path, directory, path):
        return None
    else:
        prune(directory, keep=path)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        _warn_once(f"the built library {path} does not load: {e}")
        return None
    with _lock:
        _loaded[path] = lib
    return lib


def prune(directory: str, keep: str = "", limit_mb: float | None = None) -> list:
    """Remove the least recently used libraries of the cache ``directory`` until the others
    fit in ``limit_mb`` MiB (default ``$ACTORFLOW_KERNEL_CACHE_MB``); ``keep`` is never
    removed. Returns the removed paths. Files another process removes first are skipped."""
    if limit_mb is None:
        limit_mb = env_int(CACHE_MB_VAR, CACHE_MB_DEFAULT, minimum=0)
    entries = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        if not (name.startswith("af_") and name.endswith(".so")):
            continue
        full = os.path.join(directory, name)
        try:
            st = os.stat(full)
        except OSError:
            continue
        entries.append((st.st_mtime, st.st_size, full))
    entries.sort(reverse=True)  # newest first
    budget = limit_mb * (1 << 20)
    used, removed = 0, []
    for _, size, full in entries:
        if full == keep or used + size <= budget:
            used += size
            continue
        try:
            os.unlink(full)
            removed.append(full)
        except OSError:
            pass
    return removed


def _compile(source: str, cc_path: str, directory: str, path: str) -> bool:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        _warn_once(f"the kernel cache {directory!r} can't be created: {e}")
        return False
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=directory)
    os.close(fd)
    src = tmp[:-3] + ".c"
    try:
        with open(src, "w") as f:
            f.write(source)
        r = subprocess.run([cc_path, *FLAGS, "-o", tmp, src, "-lm"], capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            first = "; ".join(r.stderr.strip().splitlines()[:3])
            _warn_once(f"{cc_path} failed with status {r.returncode}: {first}")
            return False
        os.replace(tmp, path)  # atomic: a concurrent loader sees the whole file or none
        stats["builds"] += 1
        return True
    except (OSError, subprocess.SubprocessError) as e:
        _warn_once(f"{cc_path} could not build the kernels: {e}")
        return False
    finally:
        for leftover in (tmp, src):
            try:
                os.unlink(leftover)
            except OSError:
                pass


__all__ = ["build", "cache_dir", "compiler", "prune", "CodegenWarning", "FLAGS", "CACHE_VAR",
           "CACHE_MB_VAR", "stats"]
