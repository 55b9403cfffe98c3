"""Row kernels: a task whose op computes row by row (``c_row`` on its op record,
``ops/registry.py``) gets one generated C function looping over its rows.

A row is the trailing ``row_dims`` dims of input 0 (``n`` elements); every array of the call
is seen as rows: ``"row"`` arrays hold ``n`` values per row, ``"stat"`` arrays one value per row,
``"param"`` arrays ``n`` values shared by all rows, ``"sum"`` outputs ``n`` values summed over
all rows. The C function has one signature::

    void name(char **p, const int64_t *rs, int64_t n, int64_t start, int64_t stop)

``p``: the inputs' then the outputs' data pointers; ``rs``: each array's row stride in
elements (0 for ``"param"`` and ``"sum"`` arrays); ``[start, stop)``: the rows to compute (a
chunk: chunks run on ``ops/parallel``'s threads, the GIL released by ``ctypes``). Inside a row
every array is unit-stride; the body is the op's template, with ``X<k>(i)`` / ``Y<j>(i, v)``
macros loading and storing in the arrays' own dtypes. A ``"sum"`` output is accumulated per
chunk in the computing type, and the chunks' partial sums are added in order afterwards.

Where the generated loop can't take a call (an input of another dtype than compiled, an
output that is not C-contiguous, an empty array), that call runs the op's NumPy kernel. An
input whose rows are not unit-stride is copied to a contiguous one first.
"""
from __future__ import annotations

import ctypes
import string
from dataclasses import dataclass

import numpy as np

from actorflow.compiler.codegen import emit
from actorflow.compiler.codegen.build import build
from actorflow.compiler.codegen.kernels import unaliased
from actorflow.ops import registry
from actorflow.ops.parallel import parallel_for, split, threads

PARALLEL_MIN = 1 << 15   # elements; below it one thread is faster than handing out chunks
FLOATS = ("float32", "float64", "float16", "bfloat16")
_I64P = ctypes.POINTER(ctypes.c_int64)
ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), _I64P, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64)


@dataclass
class RowTask:
    """What one generated row kernel computes (see the module docstring)."""

    op_type: str
    kinds: tuple          # per input, then per output
    dtypes: list          # per input, then per output (actorflow dtypes)
    n_in: int
    row_dims: int
    body: str             # the op's row template, filled
    in_place: tuple = ()  # (output, input) pairs it may compute in place (CRow.in_place)


# math the row forms may call besides <tgmath.h>'s: af_exp(v), exp in the type of v; for float,
# inlined so that a row loop calling it is vectorised (libm's expf is a call per element):
# exp(x) = 2^k exp(r), k = rint(x / ln 2), r = x - k ln 2 in two parts (Cody-Waite), exp(r) by
# Cephes' polynomial (measured: within 1 ulp of the correctly rounded result over [-110, 95]);
# 2^k applied as two factors, so results that are subnormal or overflow to inf round once as
# libm's do; NaN gives NaN (rint(NaN) converts to some integer; p is NaN), -inf 0, +inf inf.
ROW_PRELUDE = r"""
static inline float af_pow2i(int32_t m) {  /* 2^m for -126 <= m <= 127 */
    const uint32_t u = (uint32_t)(m + 127) << 23; float f; memcpy(&f, &u, 4); return f;
}
static inline float af_expf(float x) {
    float c = x < -104.0f ? -104.0f : x;      /* NaN stays NaN, and so does the result */
    c = c > 89.0f ? 89.0f : c;
    const float k = rintf(c * 1.44269504088896341f);
    float r = c - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const int32_t ki = (int32_t)k, k1 = ki / 2;
    return (p * af_pow2i(k1)) * af_pow2i(ki - k1);
}
#define af_exp(v) _Generic((v), float: af_expf, default: exp)(v)
"""


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def row_task(op_type: str, attrs: dict, in_metas: list, out_metas: list) -> RowTask | None:
    """The RowTask of a call of ``op_type`` over inputs / outputs of ``(shape, dtype)``, or
    None when the op has no row form for it or the arrays don't fit its kinds."""
    op = registry.get(op_type)
    if op.c_row is None or op.mutated_inputs(len(in_metas), attrs) or not out_metas:
        return None
    form = op.row_form(attrs, len(in_metas))
    if form is None or len(form.kinds) != len(in_metas) + len(out_metas):
        return None
    metas = list(in_metas) + list(out_metas)
    if not all(d.name in FLOATS for _, d in metas):
        return None
    shape0 = tuple(in_metas[0][0])
    k = form.row_dims
    if k < 1 or len(shape0) < k or form.kinds[0] != "row":
        return None
    n, rows = _size(shape0[len(shape0) - k:]), _size(shape0[:len(shape0) - k])
    want = {"row": rows * n, "stat": rows, "param": n, "sum": n}
    for i, ((shape, _), kind) in enumerate(zip(metas, form.kinds)):
        if kind not in registry.ROW_KINDS or (kind == "sum" and i < len(in_metas)):
            return None
        if _size(shape) != want[kind]:
            return None
    dtype = out_metas[0][1]
    body = _fill(form.body, attrs, dtype)
    if body is None:
        return None
    n_in = len(in_metas)
    pairs = tuple((j, a) for j, a in form.in_place
                  if a < n_in and j < len(out_metas) and form.kinds[a] == "row"
                  and form.kinds[n_in + j] == "row" and metas[a][1] == out_metas[j][1])
    return RowTask(op_type, tuple(form.kinds), [d for _, d in metas], n_in, k, body, pairs)


def _fill(body: str, attrs: dict, dtype) -> str | None:
    lits = {name: emit.literal(v, dtype) for name, v in attrs.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
    try:
        return string.Template(body).substitute(T=emit.value_type(dtype), **lits)
    except (KeyError, ValueError):
        return None


def emit_row_kernel(name: str, task: RowTask) -> str:
    """The C function ``name`` of ``task`` (see the module docstring)."""
    ct = emit.value_type(task.dtypes[task.n_in])
    lines = [f"__attribute__((optimize(\"tree-vectorize\"))) void {name}(char **p, "
             f"const int64_t *rs, int64_t n, int64_t start, int64_t stop) {{",
             "    for (int64_t r = start; r < stop; r++) {"]
    macros = []
    for a, (kind, d) in enumerate(zip(task.kinds, task.dtypes)):
        store_t, _, load, store = emit._TYPES[d.name]
        if a < task.n_in:
            lines.append(f"        const {store_t} *x{a} = (const {store_t} *)p[{a}]"
                         f" + r * rs[{a}];")
            macros.append((f"X{a}(i)", f"(({ct})({load.format(f'x{a}[(i)]')}))"))
            continue
        j = a - task.n_in
        if kind == "sum":  # the chunk's partial sums, in the computing type
            lines.append(f"        {ct} *y{j} = ({ct} *)p[{a}];")
            macros.append((f"Y{j}(i, v)", f"(y{j}[(i)] += ({ct})(v))"))
        else:
            lines.append(f"        {store_t} *y{j} = ({store_t} *)p[{a}] + r * rs[{a}];")
            macros.append((f"Y{j}(i, v)", f"(y{j}[(i)] = {store.format('(v)')})"))
    lines += [f"#define {m} {e}" for m, e in macros]
    lines.append("        {")
    lines += ["            " + ln for ln in task.body.strip().splitlines()]
    lines.append("        }")
    lines += [f"#undef {m.split('(')[0]}" for m, _ in macros]
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


class RowKernel:
    """A task's kernel running its generated row loop; the signature of its NumPy kernel."""

    def __init__(self, fn, task: RowTask, numpy_kernel, symbol: str):
        fn.argtypes = ARGTYPES
        fn.restype = None
        self.fn = fn
        self.task = task
        self.symbol = symbol
        self.numpy_kernel = numpy_kernel
        self.np_dtypes = [d.np for d in task.dtypes]
        self.acc = np.float64 if emit.value_type(task.dtypes[task.n_in]) == "double" \
            else np.float32
        self.calls = 0
        self.in_place = list(task.in_place)

    def __call__(self, ins: list, outs: list, attrs: dict) -> None:
        t = self.task
        x0 = ins[0]
        k = t.row_dims
        n, rows = _size(x0.shape[x0.ndim - k:]), _size(x0.shape[:x0.ndim - k])
        arrays = self._views(ins, outs, n, rows)
        if arrays is None or n == 0 or rows == 0:
            self.numpy_kernel(unaliased(ins, outs), outs, attrs)
            return
        views, strides = arrays
        sums = [j for j, kind in enumerate(t.kinds[t.n_in:]) if kind == "sum"]
        chunks = [(0, rows)]
        if rows * n >= PARALLEL_MIN and threads() > 1 and rows > 1:
            chunks = split(rows, max(1, (PARALLEL_MIN // 2) // n))
        partial = np.zeros((len(sums), len(chunks), n), self.acc) if sums else None
        ptrs = []
        base = [v.ctypes.data for v in views]
        for c in range(len(chunks)):
            ps = list(base)
            for s, j in enumerate(sums):
                ps[t.n_in + j] = partial[s, c].ctypes.data
            ptrs.append((ctypes.c_void_p * len(ps))(*ps))
        rs = (ctypes.c_int64 * len(strides))(*strides)
        fn = self.fn
        self.calls += 1
        if len(chunks) == 1:
            fn(ptrs[0], rs, n, 0, rows)
        else:
            parallel_for(len(chunks), lambda c: fn(ptrs[c], rs, n, chunks[c][0], chunks[c][1]))
        for s, j in enumerate(sums):
            total = partial[s, 0] if len(chunks) == 1 else np.add.reduce(partial[s], axis=0)
            np.copyto(outs[j], total.reshape(outs[j].shape), casting="unsafe")

    def _views(self, ins: list, outs: list, n: int, rows: int):
        """(arrays as the kernel reads them, row strides), or None (the NumPy kernel)."""
        t = self.task
        views, strides = [], []
        for a, (arr, kind) in enumerate(zip(list(ins) + list(outs), t.kinds)):
            if arr.dtype != self.np_dtypes[a]:
                return None
            if kind == "sum":
                views.append(arr)
                strides.append(0)
                continue
            length = 1 if kind == "stat" else n
            if a >= t.n_in and not arr.flags.c_contiguous:
                return None
            if kind == "param":
                v = np.ascontiguousarray(arr).reshape(n)
                views.append(v)
                strides.append(0)
                continue
            v = arr.reshape(rows, length)  # a view where the layout allows it, else a copy
            if a >= t.n_in and not np.shares_memory(v, arr):
                return None
            item = v.itemsize
            if (length > 1 and v.strides[1] != item) or v.strides[0] % item:
                v = np.ascontiguousarray(v)
            views.append(v)
            strides.append(v.strides[0] // item if rows > 1 else 0)
        return views, strides


def tasks_of(plan, skip: dict, in_metas, out_metas, min_elements: int = 1) -> dict:
    """task id -> RowTask for each kernel task of ``plan`` not in ``skip`` with a row form."""
    out = {}
    for t in plan.tasks:
        if t.kind != "normal" or t.task_id in skip:
            continue
        if registry.get(t.op_type).c_row is None:
            continue
        outs = out_metas(plan, t)
        if not outs or max(_size(s) for s, _ in outs) < min_elements:
            continue
        task = row_task(t.op_type, t.attrs, in_metas(plan, t), outs)
        if task is not None:
            out[t.task_id] = task
    return out


def source_of(found: dict) -> tuple:
    """``(C source, task id -> symbol)``; identical row kernels share one function."""
    parts, symbols = emit.unique_functions(
        {tid: emit_row_kernel("KERNEL", task) for tid, task in found.items()}, "af_row")
    return "\n".join(([ROW_PRELUDE] if found else []) + parts), symbols


def row_kernels_for(items: list) -> list:
    """Generated row kernels for ``items`` (``(op_type, attrs, in_metas, out_metas)`` each,
    metas ``(shape, dtype)``), built as ONE translation unit; None for an item without a row
    form, all None without a build (for tests and tools; Plans use ``codegen.generate``)."""
    found = {}
    for i, (op_type, attrs, ins, outs) in enumerate(items):
        task = row_task(op_type, attrs, ins, outs)
        if task is not None:
            found[i] = task
    out: list = [None] * len(items)
    if not found:
        return out
    source, symbols = source_of(found)
    lib = build(emit.PRELUDE + source)
    if lib is None:
        return out
    for i, task in found.items():
        out[i] = RowKernel(getattr(lib, symbols[i]), task,
                           registry.get(task.op_type).kernel_cpu, symbols[i])
    return out


__all__ = ["RowTask", "RowKernel", "row_task", "emit_row_kernel", "tasks_of", "source_of",
           "row_kernels_for", "PARALLEL_MIN"]
