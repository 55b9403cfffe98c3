"""Generated C kernels for reductions of all the elements of several inputs to one value (the
gradient norm of clipping, ``grad_norm``): one pass over the flat buffers of every input.

How the op reduces is its record's ``c_reduce`` (``ops/reduce_form.py``, set beside the NumPy
kernel); this module only wraps it in loops. Two C functions per kernel::

    void name(char **p, const int64_t *off, int64_t n, int64_t start, int64_t stop,
              double unused)
    double name_fin(const double *part, int64_t n, int64_t chunks)

``p``: the ``n`` inputs' data pointers, then the chunk's row of partials (``n`` times the
form's accumulators, as doubles); ``off``: the ``n + 1`` offsets of each input in one flat
index space over all of them; ``[start, stop)``: the chunk. Each input's part of the chunk is
reduced in blocks of ``BLOCK`` elements (vectorised, the form's ``omp simd`` operators let the
block's sum or extremum be reordered), the blocks merged in order into the input's partial.
``name_fin`` merges the chunks' partials of each input in order, folds the inputs' values into
the total and returns the result, which the kernel stores into the 0-d output as the NumPy
kernel stores its Python float (the same conversion to the output's dtype).

The first signature is the pool's row-kernel one (``pool.run_rows``: a pointer array per
chunk), so a call of at least ``PARALLEL_MIN`` elements runs its chunks in one ``ctypes``
call on the C pool's threads (without the pool library, over ``ops/parallel``'s helpers).
Inputs of one dtype (float32, float64, float16, bfloat16; the halves computed in float,
loaded with the exact bit conversions of ``REDUCE_PRELUDE``),
C-contiguous; inputs without elements are left out, as the NumPy kernel leaves them; any other
call runs the NumPy kernel.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from actorflow.compiler.codegen import emit, pool
from actorflow.compiler.codegen.build import build
from actorflow.compiler.codegen.prepared import PreparedCalls
from actorflow.ops import registry
from actorflow.ops.parallel import parallel_for, split, threads

PARALLEL_MIN = 1 << 16   # elements; below it one thread reads them faster than two start
BLOCK = 2048             # elements per block: each block's partial starts from the form's init
_ACC_TYPES = {"T": "T", "double": "double", "int": "int"}
# What the forms may call besides <tgmath.h>, and the loads of half types: GCC 12 neither
# vectorises a loop converting _Float16 without AVX512-FP16 nor keeps ``x != x`` on a converted
# half in float (it narrows it to a libgcc call per element: a float16 inf-norm of 5M elements
# took 49 ms, 3.7 with these). af_h2f is exact for every half (normal, subnormal, inf, NaN);
# AF_ISNAN(v) tests the bits of a float or double.
REDUCE_PRELUDE = r"""
static inline float af_h2f(uint16_t h) {
    const uint32_t em = h & 0x7fffu;
    uint32_t u = em << 13; float f; memcpy(&f, &u, 4);
    f *= 0x1p112f;                        /* rebias the exponent; subnormals scale exactly */
    memcpy(&u, &f, 4);
    u |= em >= 0x7c00u ? 0x7f800000u : 0u;  /* inf and NaN */
    u |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &u, 4); return f;
}
static inline int af_isnan_f(float v) {
    uint32_t u; memcpy(&u, &v, 4); return (u & 0x7fffffffu) > 0x7f800000u;
}
static inline int af_isnan_d(double v) {
    uint64_t u; memcpy(&u, &v, 8); return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}
#define AF_ISNAN(v) _Generic((v), float: af_isnan_f, double: af_isnan_d)(v)
"""
# dtype name -> (storage C type, load template)
_LOADS = {"float32": ("float", "{}"), "float64": ("double", "{}"),
          "float16": ("uint16_t", "af_h2f({})"), "bfloat16": ("uint16_t", "af_from_bf16({})")}
_ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
             ctypes.c_int64, ctypes.c_double)
_FIN_ARGTYPES = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


class ReduceTask(NamedTuple):
    """What one task's generated reduction needs: the op, its attrs and form, and the inputs'
    dtype name and NumPy dtype."""

    op: object
    attrs: dict
    form: object
    dtype: str
    np_dtype: object


def task_of(op_type: str, attrs: dict, in_metas: list, out_metas: list) -> ReduceTask | None:
    """The ReduceTask of a call of ``op_type`` with ``attrs`` on inputs and outputs of
    ``(shape, dtype)``, or None when no generated reduction computes it."""
    op = registry.get(op_type)
    if op.c_reduce is None or not in_metas or len(out_metas) != 1:
        return None
    if op.mutated_inputs(len(in_metas), attrs) or tuple(out_metas[0][0]) != ():
        return None
    names = {d.name for _, d in in_metas}
    if len(names) != 1 or next(iter(names)) not in _LOADS:
        return None
    form = op.c_reduce(attrs)
    if form is None:
        return None
    d = in_metas[0][1]
    return ReduceTask(op, dict(attrs), form, d.name, np.dtype(d.np))


def elements(in_metas: list) -> int:
    """How many elements a reduction over inputs of ``(shape, dtype)`` reads."""
    return sum(int(np.prod(shape, dtype=np.int64)) for shape, _ in in_metas)


def emit_reduce(name: str, form, dtype: str) -> str:
    """The C source of the reduction ``name`` (and ``name_fin``) for ``form`` on ``dtype``."""
    store_t, load = _LOADS[dtype]
    value_t = "double" if dtype == "float64" else "float"
    k = len(form.accs)
    decl = "".join(f"{_ACC_TYPES[c]} {a} = {init}; " for a, c, init, _ in form.accs)
    decl_b = "".join(f"{_ACC_TYPES[c]} {a}_b; " for a, c, _, _ in form.accs)
    take_b = "".join(f"{a}_b = {a}; " for a, _, _, _ in form.accs)
    simd = " ".join(f"reduction({op}:{a})" for a, _, _, op in form.accs if op)
    pragma = f"#pragma omp simd {simd}\n" if simd else ""
    put = "".join(f"part[i * {k} + {j}] = (double){a}; " for j, (a, _, _, _) in enumerate(
        form.accs))
    get = "".join(f"{_ACC_TYPES[c]} {a} = ({_ACC_TYPES[c]})q[{j}]; "
                  for j, (a, c, _, _) in enumerate(form.accs))
    get_b = "".join(f"{_ACC_TYPES[c]} {a}_b = ({_ACC_TYPES[c]})r[{j}]; "
                    for j, (a, c, _, _) in enumerate(form.accs))
    return (
        f"#define T {value_t}\n"
        f"__attribute__((optimize(\"tree-vectorize\"))) void {name}(char **p, "
        f"const int64_t *off, int64_t n, int64_t start, int64_t stop, double unused_) {{\n"
        f"    double *part = (double *)p[n];\n    (void)unused_;\n"
        f"    for (int64_t i = 0; i < n; i++) {{\n"
        f"        const int64_t lo = off[i], hi = off[i + 1];\n"
        f"        {decl}\n"
        f"        if (hi > start && lo < stop) {{\n"
        f"            const {store_t} *xs = (const {store_t} *)p[i];\n"
        f"            const int64_t a0 = (start > lo ? start : lo) - lo;\n"
        f"            const int64_t b0 = (stop < hi ? stop : hi) - lo;\n"
        f"            for (int64_t q0 = a0; q0 < b0; q0 += {BLOCK}) {{\n"
        f"                const int64_t e0 = b0 - q0 > {BLOCK} ? q0 + {BLOCK} : b0;\n"
        f"                {decl_b}\n"
        f"                {{\n"
        f"                    {decl}\n"
        f"{pragma}"
        f"                    for (int64_t j = q0; j < e0; j++) {{\n"
        f"                        const T x = {load.format('xs[j]')};\n"
        f"                        {form.body}\n"
        f"                    }}\n"
        f"                    {take_b}\n"
        f"                }}\n"
        f"                {form.merge}\n"
        f"            }}\n"
        f"        }}\n"
        f"        {put}\n"
        f"    }}\n}}\n"
        f"double {name}_fin(const double *part, int64_t n, int64_t chunks) {{\n"
        f"    double t = {form.init};\n"
        f"    for (int64_t i = 0; i < n; i++) {{\n"
        f"        const double *q = part + i * {k};\n"
        f"        {get}\n"
        f"        for (int64_t c = 1; c < chunks; c++) {{\n"
        f"            const double *r = q + c * n * {k};\n"
        f"            {get_b}\n"
        f"            {form.merge}\n"
        f"        }}\n"
        f"        {{ const double v = {form.value}; {form.total} }}\n"
        f"    }}\n"
        f"    return {form.final};\n}}\n#undef T\n")


def source_of(found: dict) -> tuple:
    """``(C source, key -> symbol)`` for the ReduceTasks ``found`` (identical kernels share
    one function); the source goes into the Plan's translation unit after ``emit.PRELUDE``."""
    parts, symbols = emit.unique_functions(
        {key: emit_reduce("KERNEL", r.form, r.dtype) for key, r in found.items()}, "af_r")
    return "\n".join(([REDUCE_PRELUDE] if parts else []) + parts), symbols


class _Call(NamedTuple):
    """What a call on given arrays keeps for the next call on the same ones (``prepared.py``:
    a graph's registers are the same arrays every step, its views new objects of the same
    memory): chunks, partials, the C pointer arrays."""

    threads: int
    n: int
    chunks: list
    part: np.ndarray
    off: np.ndarray
    ptrs: list
    tables: tuple | None


class ReduceKernel:
    """A task's kernel running its generated reduction; the signature of the task's NumPy
    kernel (``kernel(ins, outs, attrs)``), which it calls for what it can't take."""

    def __init__(self, lib, symbol: str, task: ReduceTask, numpy_kernel):
        fn = getattr(lib, symbol)
        fn.argtypes = _ARGTYPES
        fn.restype = None
        fin = getattr(lib, symbol + "_fin")
        fin.argtypes = _FIN_ARGTYPES
        fin.restype = ctypes.c_double
        self.fn, self.fin = fn, fin
        self.address = pool.address(fn)
        self.task = task
        self.symbol = symbol
        self.numpy_kernel = numpy_kernel
        self.k = len(task.form.accs)
        self.calls = 0
        self.prepared = PreparedCalls()  # a call's arrays -> its _Call (prepared.py)

    def __call__(self, ins: list, outs: list, attrs: dict) -> None:
        want = self.task.np_dtype
        if not all(a.dtype == want and a.flags.c_contiguous for a in ins):
            self.numpy_kernel(ins, outs, attrs)
            return
        call = self.prepared.get(ins)
        if call is None or call.threads != threads():
            call = self._prepare(ins)
            self.prepared.put(ins, call)
        self.calls += 1
        if call.n == 0:
            outs[0][...] = 0.0  # no elements: the NumPy kernel's 0
            return
        fn, n, off = self.fn, call.n, call.off.ctypes.data
        if len(call.chunks) == 1:
            fn(call.ptrs[0], off, n, 0, call.chunks[0][1], 0.0)
        elif not pool.run_rows(self.address, call.ptrs, off, n, call.chunks, 0.0,
                               tables=call.tables):
            parallel_for(len(call.chunks),
                         lambda c: fn(call.ptrs[c], off, n, *call.chunks[c], 0.0))
        outs[0][...] = self.fin(call.part.ctypes.data, n, len(call.chunks))

    def _prepare(self, ins: list) -> _Call:
        arrays = [a for a in ins if a.size]
        n = len(arrays)
        off = np.zeros(n + 1, np.int64)
        np.cumsum([a.size for a in arrays], out=off[1:])
        total = int(off[-1])
        chunks = (split(total, PARALLEL_MIN // 2) if total >= PARALLEL_MIN and threads() > 1
                  else [(0, total)])
        part = np.zeros((max(1, len(chunks)), max(1, n) * self.k), np.float64)
        ptrs = [(ctypes.c_void_p * (n + 1))(*[a.ctypes.data for a in arrays],
                                             part[c].ctypes.data)
                for c in range(len(chunks))]
        tables = pool.tables_of(ptrs, chunks) if len(chunks) > 1 else None
        return _Call(threads(), n, chunks, part, off, ptrs, tables)


def kernel(lib, symbol: str, task: ReduceTask, op_type: str) -> ReduceKernel:
    """The ReduceKernel calling ``symbol`` of ``lib`` for ``task`` (a task of ``op_type``)."""
    return ReduceKernel(lib, symbol, task, registry.get(op_type).kernel_cpu)


def tasks_of(plan, skip: dict, in_metas, out_metas, min_elements: int = 1) -> dict:
    """task id -> ReduceTask for each kernel task of ``plan`` not in ``skip`` whose op has a
    reduction form and reads at least ``min_elements`` elements."""
    out = {}
    for t in plan.tasks:
        if t.kind != "normal" or t.task_id in skip or registry.get(t.op_type).c_reduce is None:
            continue
        metas = in_metas(plan, t)
        task = task_of(t.op_type, t.attrs, metas, out_metas(plan, t))
        if task is not None and elements(metas) >= min_elements:
            out[t.task_id] = task
    return out


def reduce_kernels_for(items: list) -> list:
    """Built ReduceKernels for ``items`` (``(op_type, attrs, in_metas, out_metas)`` each), as
    ONE translation unit; None for an item without a generated reduction, all None without a
    build (for tests and tools; Plans use ``codegen.generate``)."""
    found = {}
    for i, (op_type, attrs, ins, outs) in enumerate(items):
        task = task_of(op_type, attrs, ins, outs)
        if task is not None:
            found[i] = task
    out: list = [None] * len(items)
    if not found:
        return out
    source, symbols = source_of(found)
    lib = build(emit.PRELUDE + "\n" + source)
    if lib is not None:
        for i, task in found.items():
            out[i] = kernel(lib, symbols[i], task, items[i][0])
    return out


__all__ = ["ReduceTask", "ReduceKernel", "task_of", "elements", "emit_reduce", "source_of",
           "kernel", "tasks_of", "reduce_kernels_for", "PARALLEL_MIN", "BLOCK", "REDUCE_PRELUDE"]
