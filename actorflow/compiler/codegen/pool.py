"""Chunks of a generated kernel run on threads of C, without the GIL.

A generated kernel splits a large call into chunks (``ops/parallel.split``). Handing each
chunk to ``ops/parallel``'s Python helpers costs a GIL hand-off per chunk, each side
re-taking the GIL after its C call: on kernels of 50-100 microseconds (a layer norm of
1024 x 128) that ate the whole gain of the second core, and in a graph it queued behind the
other actor threads' Python. This module builds one small C library (once per process and
cached on disk like the generated ones, ``build.py``) with a pool of pthreads: one ctypes
call (GIL released) runs every chunk, on the calling thread and on up to ``threads() - 1``
pool threads that claim chunks from a shared counter (so a slow-to-wake thread never delays
the call: the caller takes the chunks it has not claimed), and returns when all have run.

Only one call uses the pool at a time; a call that finds it busy (two actor threads, or
eager and a graph, at once) runs its chunks on its own thread instead of waiting. Pool
threads sleep on a condition variable between calls; after a fork the child starts with no
pool threads (``pthread_atfork``) and makes new ones on its first call. Without a C compiler
``runner()`` is None and the kernels use ``ops/parallel``'s helpers as before.
"""
from __future__ import annotations

import ctypes
import threading

from actorflow.compiler.codegen.build import build
from actorflow.ops.parallel import threads

SOURCE = r"""
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define AF_SPIN_NS SPIN_NS_VALUE
#if defined(__x86_64__) || defined(__i386__)
#define AF_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define AF_PAUSE() __asm__ __volatile__("yield")
#else
#define AF_PAUSE() ((void)0)
#endif

typedef void (*af_row_fn)(char **, const int64_t *, int64_t, int64_t, int64_t, double);
typedef void (*af_elem_fn)(char **, const int64_t *, const int64_t *, int64_t, int64_t,
                           int64_t, int);
typedef void (*af_update_fn)(char **, const void *, const void *, int64_t, int64_t, int64_t);

typedef struct {
    int kind;                 /* 0: a row kernel, 1: an elementwise kernel, 2: an update */
    void *fn;
    char ***ptrs;             /* per chunk (rows) or one for all (elementwise, update) */
    const void *a, *b;        /* rows: row strides; elementwise: strides, shape;
                                 update: offsets, per-parameter scalars */
    int64_t n;                /* rows: row length; elementwise: dims; update: parameters */
    const int64_t *bounds;    /* start, stop per chunk */
    int64_t chunks, helpers;
    double pre;
    int fast;
    atomic_llong next, done, by_pool;
    int active;               /* pool threads inside the call (guarded by af_lock) */
} af_job;

static pthread_mutex_t af_submit = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t af_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t af_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t af_finished = PTHREAD_COND_INITIALIZER;
static af_job *af_current = 0;
static atomic_long af_generation = 0;
static int af_started = 0;
static int af_atfork = 0;

static void af_run_chunk(af_job *j, int64_t c) {
    const int64_t start = j->bounds[2 * c], stop = j->bounds[2 * c + 1];
    if (j->kind == 0)
        ((af_row_fn)j->fn)(j->ptrs[c], j->a, j->n, start, stop, j->pre);
    else if (j->kind == 1)
        ((af_elem_fn)j->fn)(j->ptrs[0], j->a, j->b, j->n, start, stop, j->fast);
    else
        ((af_update_fn)j->fn)(j->ptrs[0], j->a, j->b, j->n, start, stop);
}

static int64_t af_work(af_job *j) {
    int64_t c, ran = 0;
    while ((c = atomic_fetch_add(&j->next, 1)) < j->chunks) {
        af_run_chunk(j, c);
        ran++;
        if (atomic_fetch_add(&j->done, 1) + 1 == j->chunks) {
            pthread_mutex_lock(&af_lock);
            pthread_cond_broadcast(&af_finished);
            pthread_mutex_unlock(&af_lock);
        }
    }
    return ran;
}

static int64_t af_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *af_worker(void *arg) {
    const intptr_t index = (intptr_t)arg;
    long seen = 0;
    for (;;) {
        /* a kernel's chunks often follow the last call's closely: watch for AF_SPIN_NS
           before sleeping, since waking from the condition variable takes tens of us */
        const int64_t until = af_now_ns() + AF_SPIN_NS;
        while (atomic_load_explicit(&af_generation, memory_order_acquire) == seen
               && af_now_ns() < until)
            AF_PAUSE();
        pthread_mutex_lock(&af_lock);
        while (af_generation == seen)
            pthread_cond_wait(&af_wake, &af_lock);
        seen = af_generation;
        af_job *j = af_current;
        if (j && index < j->helpers)
            j->active++;    /* the caller returns only once this thread has left the job */
        else
            j = 0;
        pthread_mutex_unlock(&af_lock);
        if (j) {
            atomic_fetch_add(&j->by_pool, af_work(j));
            pthread_mutex_lock(&af_lock);
            if (--j->active == 0)
                pthread_cond_broadcast(&af_finished);
            pthread_mutex_unlock(&af_lock);
        }
    }
    return 0;
}

static void af_after_fork(void) {   /* the child has none of the parent's pool threads */
    pthread_mutex_init(&af_submit, 0);
    pthread_mutex_init(&af_lock, 0);
    pthread_cond_init(&af_wake, 0);
    pthread_cond_init(&af_finished, 0);
    af_current = 0;
    af_started = 0;
}

/* Start pool threads until there are `want`; returns how many there are. */
static int af_grow(int want) {
    if (!af_atfork) {
        pthread_atfork(0, 0, af_after_fork);
        af_atfork = 1;
    }
    while (af_started < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int bad = pthread_create(&t, &attr, af_worker, (void *)(intptr_t)af_started);
        pthread_attr_destroy(&attr);
        if (bad)
            break;
        af_started++;
    }
    return af_started;
}

/* Run every chunk of one kernel call; returns how many chunks pool threads ran, or -1 when
   the pool was busy (or the call had nothing to share) and the caller ran them all. */
int64_t af_pool_run(int kind, void *fn, char ***ptrs, const void *a, const void *b,
                int64_t n, const int64_t *bounds, int64_t chunks, double pre, int fast,
                int helpers) {
    af_job j = {kind, fn, ptrs, a, b, n, bounds, chunks, 0, pre, fast, 0, 0, 0, 0};
    if (helpers < 1 || chunks < 2 || pthread_mutex_trylock(&af_submit) != 0) {
        for (int64_t c = 0; c < chunks; c++)
            af_run_chunk(&j, c);
        return -1;
    }
    j.helpers = af_grow(helpers);
    if (j.helpers > helpers)
        j.helpers = helpers;
    pthread_mutex_lock(&af_lock);
    af_current = &j;
    af_generation++;
    pthread_cond_broadcast(&af_wake);
    pthread_mutex_unlock(&af_lock);
    af_work(&j);
    pthread_mutex_lock(&af_lock);
    while (atomic_load(&j.done) < chunks || j.active > 0)
        pthread_cond_wait(&af_finished, &af_lock);
    af_current = 0;
    pthread_mutex_unlock(&af_lock);
    pthread_mutex_unlock(&af_submit);
    return atomic_load(&j.by_pool);
}
"""
# how long a pool thread watches for the next call before it sleeps (measured on the 2-core
# machine: waking from the condition variable took long enough that on a 1024 x 128 layer
# norm the pool's thread ran 1 of 4 chunks; watching, it takes its share)
SPIN_NS = 100_000

_I64P = ctypes.POINTER(ctypes.c_int64)
_ARGTYPES = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_int64, _I64P, ctypes.c_int64, ctypes.c_double, ctypes.c_int, ctypes.c_int)
_lock = threading.Lock()
_state: dict = {}
# calls run on the pool, chunks its threads ran, calls that found it busy and ran alone
stats = {"calls": 0, "pool_chunks": 0, "busy": 0}


def runner():
    """The pool's ``af_pool_run`` (a ctypes function), or None where the library does not
    build (no C compiler): callers then use ``ops/parallel``'s helpers."""
    fn = _state.get("fn", False)
    if fn is not False:
        return fn
    with _lock:
        if "fn" not in _state:
            lib = build(SOURCE.replace("SPIN_NS_VALUE", str(SPIN_NS)))
            fn = None
            if lib is not None:
                fn = lib.af_pool_run
                fn.argtypes = _ARGTYPES
                fn.restype = ctypes.c_int64
            _state["fn"] = fn
    return _state["fn"]


def address(fn) -> int:
    """The C address of a ctypes function."""
    return ctypes.cast(fn, ctypes.c_void_p).value


def bounds_of(chunks: list):
    """The ``(start, stop)`` pairs of ``chunks`` as the C array ``af_pool_run`` reads."""
    flat = [v for pair in chunks for v in pair]
    return (ctypes.c_int64 * len(flat))(*flat)


def _address(obj) -> int | None:
    """The address a C pointer argument gets: a ctypes object's, an int as it is, None."""
    if obj is None or isinstance(obj, int):
        return obj
    return ctypes.addressof(obj)


def tables_of(ptrs: list, chunks: list) -> tuple:
    """``(table, bounds)``: the C arrays ``af_pool_run`` reads for pointer arrays ``ptrs`` and
    ``chunks``; a caller running the same call again may keep them (``run_rows``'s
    ``tables``)."""
    return (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(p) for p in ptrs]), bounds_of(chunks)


def _run(kind: int, fn_address: int, ptrs: list, a, b, n: int, chunks: list,
         pre_total: float = 0.0, fast: int = 0, tables: tuple | None = None) -> bool:
    run = runner()
    if run is None:
        return False
    table, bounds = tables if tables is not None else tables_of(ptrs, chunks)
    got = run(kind, fn_address, table, _address(a), _address(b), n, bounds,
              len(chunks), pre_total, fast, threads() - 1)
    stats["calls"] += 1
    if got < 0:
        stats["busy"] += 1
    else:
        stats["pool_chunks"] += got
    return True


def run_rows(fn_address: int, ptrs: list, rs, n: int, chunks: list, pre_total: float,
             tables: tuple | None = None) -> bool:
    """Run a row kernel's ``chunks`` (one pointer array per chunk in ``ptrs``, row strides
    ``rs``; ``tables``: ``tables_of(ptrs, chunks)`` kept from an earlier call, if any) on the
    pool; False where there is no pool library (nothing ran)."""
    return _run(0, fn_address, ptrs, rs, None, n, chunks, pre_total, tables=tables)


def run_elementwise(fn_address: int, ptrs, strides, shape, nd: int, chunks: list,
                    fast: int) -> bool:
    """Run an elementwise kernel's ``chunks`` of one pointer array on the pool; False where
    there is no pool library (nothing ran)."""
    return _run(1, fn_address, [ptrs], strides, shape, nd, chunks, fast=fast)


def run_update(fn_address: int, ptrs, offsets: int, scalars: int, n: int,
               chunks: list) -> bool:
    """Run an optimizer update loop's ``chunks`` (``offsets`` and ``scalars``: addresses of
    its int64 offsets and float64 per-parameter scalars) on the pool; False where there is
    no pool library (nothing ran)."""
    return _run(2, fn_address, [ptrs], offsets, scalars, n, chunks)


__all__ = ["runner", "run_rows", "run_elementwise", "run_update", "address", "bounds_of",
           "tables_of",
           "SOURCE", "stats"]
