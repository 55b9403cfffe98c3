"""Row kernels: a task whose op computes row by row (``c_row`` on its op record,
``ops/registry.py``) gets one generated C function looping over its rows (its source:
``row_source.py``).

A row is the trailing ``row_dims`` dims of input ``rows_of`` (0 unless the form says; ``n``
elements); every array of the call is seen as rows: ``"row"`` arrays hold ``n`` values per row,
``"stat"`` arrays one value per row, ``"index"`` arrays one integer per row, ``"param"`` arrays
``n`` values shared by all rows, ``"block"`` arrays a block of their own trailing ``row_dims``
dims per row (sizes filled into the body from ``CRow.dims``), ``"scalar"`` inputs one value for
all rows, ``"sum"`` outputs ``n`` values summed over all rows, ``"total"`` / ``"mean"`` outputs
one value summed over all rows (a mean then divided by the ``pre`` pass's total). The C
function's arguments: ``p``, the inputs' then the outputs' data pointers; ``rs``, four numbers
per array saying where its rows start (``row_layout.py``: one stride, or two for a view
whose leading dims don't collapse, and the stride of a row's sub-rows; 0 for arrays shared
by all rows); ``[start, stop)``, the rows to
compute (a chunk: a call's chunks run on the C pool's threads, ``pool.py``, in one ``ctypes``
call without the GIL, or on ``ops/parallel``'s helpers where the pool library is missing);
``pre_total``. Inside a row every array is unit-stride. A ``"sum"`` output is accumulated per
chunk in the computing type, a ``"total"`` or ``"mean"`` one in double, and the chunks' partial
sums are added in order afterwards.

A form with a ``pre`` part first runs it over all rows on the calling thread; a row that
refuses makes the call run the op's NumPy kernel on its untouched inputs (which raises the
op's error). Where the generated loop can't take a call (an input of another dtype than
compiled, an output that is not C-contiguous, an empty array), that call runs the NumPy
kernel too. A "row" or "block" input of several sub-rows (``row_dims`` >= 2) whose layout
``row_layout`` can address is read in place, the kernel gathering each row that needs it into
a per-chunk buffer; any other input whose rows are not unit-stride is copied to a contiguous
one first. What a call works out besides the values (views, strides, chunks, per-chunk
buffers, the C pointer arrays) is kept for the next call on the same array objects, or on new
objects of the same memory and layout (``_Call``: a graph's registers are the same every step,
its views made anew each act), where only the copied inputs are copied again: a 1024 x 128
layer norm's Python side 17 -> 3 us.
"""
from __future__ import annotations

import ctypes
import string
from dataclasses import dataclass

import numpy as np

from actorflow.compiler.codegen import emit, pool, row_layout
from actorflow.compiler.codegen.build import build
from actorflow.compiler.codegen.kernels import unaliased
from actorflow.compiler.codegen.prepared import PreparedCalls
from actorflow.compiler.codegen.row_source import (INDEX_TYPES, ROW_PRELUDE, TOTALS,
                                                   emit_row_kernel)
from actorflow.ops import registry
from actorflow.ops.parallel import parallel_for, split, threads

PARALLEL_MIN = 1 << 15   # elements; below it one thread is faster than handing out chunks
FLOATS = ("float32", "float64", "float16", "bfloat16")
_I64P = ctypes.POINTER(ctypes.c_int64)
ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), _I64P, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_double)
PRE_ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), _I64P, ctypes.c_int64, ctypes.c_int64,
                ctypes.POINTER(ctypes.c_double))


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
    rows_of: int = 0      # the input whose trailing dims are the rows
    pre: str = ""         # the pass over all rows first (CRow.pre), filled
    scratch: int = 0      # scratch rows of the computing type (CRow.scratch)
    # per input: (sub-row length, sub-rows) where the kernel may gather a strided row into a
    # per-chunk buffer (row_layout.py), else ()
    gather: tuple = ()
    n: int = 0            # the row length the kernel is built for (0: any, read at each call)


@dataclass
class _Call:
    """What a row kernel keeps of a call on given arrays for the next call on the same ones
    (a graph's register arrays are the same every step): the views and strides it read them
    through, chunks, per-chunk partial sums and scratch, and the C pointer arrays; only the
    inputs read through copies (``refresh``) are copied again. ``numpy``: such calls run the
    NumPy kernel."""

    threads: int          # the intra-op threads its chunks were cut for
    numpy: bool = False
    views: list = None
    refresh: list = None
    base: object = None
    rs: object = None
    n: int = 0
    rows: int = 0
    chunks: list = None
    sums: list = None
    totals: list = None
    partial: object = None
    acc: object = None
    scratch: object = None  # (scratch rows, gather buffers), held for the C pointers
    ptrs: list = None
    tables: tuple = None


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
    n_in = len(in_metas)
    if form is None or len(form.kinds) != n_in + len(out_metas) or not 0 <= form.rows_of < n_in:
        return None
    metas = list(in_metas) + list(out_metas)
    shape0 = tuple(in_metas[form.rows_of][0])
    k = form.row_dims
    if k < 1 or len(shape0) < k or form.kinds[form.rows_of] != "row":
        return None
    if form.max_ndim and len(shape0) > form.max_ndim:
        return None
    n, rows = _size(shape0[len(shape0) - k:]), _size(shape0[:len(shape0) - k])
    want = {"row": rows * n, "stat": rows, "index": rows, "param": n, "sum": n, "scalar": 1,
            "total": 1, "mean": 1}
    for i, ((shape, d), kind) in enumerate(zip(metas, form.kinds)):
        if kind == "block":  # its own trailing dims, the row input's number of rows
            if len(shape) < k or _size(shape[:len(shape) - k]) != rows:
                return None
        elif kind not in registry.ROW_KINDS or _size(shape) != want[kind]:
            return None
        if kind in (registry.ROW_OUTPUT_KINDS if i < n_in else registry.ROW_INPUT_KINDS):
            return None
        if d.name not in (INDEX_TYPES if kind == "index" else FLOATS):
            return None
    if "mean" in form.kinds and not form.pre:
        return None  # a mean divides by the pre pass's total
    floats = {d.name for (_, d), kind in zip(metas, form.kinds) if kind != "index"}
    if form.floats and (len(floats) != 1 or not floats <= set(form.floats)):
        return None
    sizes = {}
    for name, a, axis in form.dims:
        if not 0 <= a < len(metas) or not -len(metas[a][0]) <= axis < len(metas[a][0]):
            return None
        sizes[name] = int(metas[a][0][axis])
    dtype = in_metas[form.rows_of][1]
    body, pre = _fill(form.body, attrs, dtype, sizes), _fill(form.pre, attrs, dtype, sizes)
    if body is None or pre is None:
        return None
    pairs = tuple((j, a) for j, a in form.in_place
                  if a < n_in and j < len(out_metas) and form.kinds[a] == "row"
                  and form.kinds[n_in + j] == "row" and metas[a][1] == out_metas[j][1])
    gather = tuple(_gather_of(shape, kind, k) if not pre else ()
                   for (shape, _), kind in zip(in_metas, form.kinds))
    return RowTask(op_type, tuple(form.kinds), [d for _, d in metas], n_in, k, body, pairs,
                   form.rows_of, pre, max(0, int(form.scratch)), gather, n)


def _gather_of(shape: tuple, kind: str, k: int) -> tuple:
    """``(sub-row length, sub-rows)`` of an input whose rows have several sub-rows (the
    kernel may gather them, ``row_layout.py``), else ()."""
    if kind not in ("row", "block") or k < 2:
        return ()
    m, length = int(shape[-1]), _size(shape[len(shape) - k:])
    if m < 1 or length <= m:
        return ()
    return (m, length // m)


def _fill(body: str, attrs: dict, dtype, sizes: dict) -> str | None:
    lits = {name: emit.literal(v, dtype) for name, v in attrs.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
    lits.update({name: f"((int64_t){v})" for name, v in sizes.items()})
    try:
        return string.Template(body).substitute(T=emit.value_type(dtype), **lits)
    except (KeyError, ValueError):
        return None


class RowKernel:
    """A task's kernel running its generated row loop; the signature of its NumPy kernel."""

    def __init__(self, fn, task: RowTask, numpy_kernel, symbol: str, pre_fn=None):
        fn.argtypes = ARGTYPES
        fn.restype = None
        if pre_fn is not None:
            pre_fn.argtypes = PRE_ARGTYPES
            pre_fn.restype = ctypes.c_int64
        self.fn, self.pre_fn = fn, pre_fn
        self.address = pool.address(fn)
        self.task = task
        self.symbol = symbol
        self.numpy_kernel = numpy_kernel
        self.np_dtypes = [d.np for d in task.dtypes]
        self.acc = np.float64 if emit.value_type(task.dtypes[task.rows_of]) == "double" \
            else np.float32
        self.calls = 0
        self.refused = 0  # calls the pre pass handed to the NumPy kernel
        self.in_place = list(task.in_place)
        self.prepared = PreparedCalls()  # a call's arrays -> its _Call (prepared.py)

    @classmethod
    def from_library(cls, lib, symbol: str, task: RowTask, numpy_kernel) -> "RowKernel":
        """The kernel of ``task`` whose functions ``lib`` holds under ``symbol``."""
        pre = getattr(lib, symbol + "_pre") if task.pre else None
        return cls(getattr(lib, symbol), task, numpy_kernel, symbol, pre)

    def __call__(self, ins: list, outs: list, attrs: dict) -> None:
        both = list(ins) + list(outs)
        call = self.prepared.get(both)
        if call is None or call.threads != threads():
            call = self._prepare(ins, outs)
            self.prepared.put(both, call)
        if call.numpy:
            self.numpy_kernel(unaliased(ins, outs), outs, attrs)
            return
        for buf, arr in call.refresh:  # inputs read through copies: this call's values
            np.copyto(buf.reshape(arr.shape), arr, casting="no")
        pre_total = 0.0
        if self.pre_fn is not None:  # before anything is written: a refusal leaves ins intact
            got = ctypes.c_double(0.0)
            if self.pre_fn(call.base, call.rs, call.n, call.rows, ctypes.byref(got)) >= 0:
                self.refused += 1
                self.numpy_kernel(unaliased(ins, outs), outs, attrs)
                return
            pre_total = got.value
        if call.partial is not None:
            call.partial.fill(0)
        if call.acc is not None:
            call.acc.fill(0)
        fn, chunks, ptrs, rs, n = self.fn, call.chunks, call.ptrs, call.rs, call.n
        self.calls += 1
        if len(chunks) == 1:
            fn(ptrs[0], rs, n, 0, call.rows, pre_total)
        elif not pool.run_rows(self.address, ptrs, rs, n, chunks, pre_total, call.tables):
            parallel_for(len(chunks), lambda c: fn(ptrs[c], rs, n, chunks[c][0], chunks[c][1],
                                                   pre_total))
        t = self.task
        out_kinds = t.kinds[t.n_in:]
        for s, j in enumerate(call.sums):
            p = call.partial[s]
            total = p[0] if len(chunks) == 1 else np.add.reduce(p, axis=0)
            np.copyto(outs[j], total.reshape(outs[j].shape), casting="unsafe")
        for s, j in enumerate(call.totals):
            total = np.float64(0.0)
            for c in range(len(chunks)):  # in order
                total += call.acc[s, c]
            if out_kinds[j] == "mean":
                with np.errstate(divide="ignore", invalid="ignore"):
                    total = total / np.float64(pre_total)
            np.copyto(outs[j], total, casting="unsafe")

    def _prepare(self, ins: list, outs: list) -> "_Call":
        """What a call on these arrays needs besides their values: views, strides, chunks,
        per-chunk buffers and pointer arrays (kept for the next call on the same arrays)."""
        t = self.task
        x0 = ins[t.rows_of]
        k = t.row_dims
        n, rows = _size(x0.shape[x0.ndim - k:]), _size(x0.shape[:x0.ndim - k])
        arrays = self._views(ins, outs, n, rows)
        if arrays is None or n == 0 or rows == 0 or (t.n and n != t.n):
            return _Call(threads(), numpy=True)
        views, words, refresh = arrays
        out_kinds = t.kinds[t.n_in:]
        sums = [j for j, kind in enumerate(out_kinds) if kind == "sum"]
        totals = [j for j, kind in enumerate(out_kinds) if kind in TOTALS]
        base = [v.ctypes.data for v in views]
        chunks = [(0, rows)]
        if rows * n >= PARALLEL_MIN and threads() > 1 and rows > 1:
            chunks = split(rows, max(1, (PARALLEL_MIN // 2) // n))
        partial = np.zeros((len(sums), len(chunks), n), self.acc) if sums else None
        acc = np.zeros((len(totals), len(chunks)), np.float64) if totals else None
        longest = max([n] + [_size(a.shape[a.ndim - t.row_dims:])
                             for a, kind in zip(list(ins) + list(outs), t.kinds)
                             if kind == "block"])
        scratch = np.empty((len(chunks), t.scratch, longest), self.acc) if t.scratch else None
        # per chunk, a buffer for each input the kernel may gather (row_layout.py)
        gathers = [np.empty((len(chunks), g[0] * g[1]), self.np_dtypes[a])
                   for a, g in enumerate(t.gather) if g]
        ptrs = []
        for c in range(len(chunks)):
            ps = list(base) + [scratch[c, k].ctypes.data for k in range(t.scratch)] + \
                [g[c].ctypes.data for g in gathers]
            for s, j in enumerate(sums):
                ps[t.n_in + j] = partial[s, c].ctypes.data
            for s, j in enumerate(totals):
                ps[t.n_in + j] = acc[s, c:].ctypes.data
            ptrs.append((ctypes.c_void_p * len(ps))(*ps))
        return _Call(threads(), False, views, refresh, (ctypes.c_void_p * len(base))(*base),
                     (ctypes.c_int64 * len(words))(*words), n, rows, chunks, sums, totals,
                     partial, acc, (scratch, gathers), ptrs,
                     pool.tables_of(ptrs, chunks) if len(chunks) > 1 else None)

    def _views(self, ins: list, outs: list, n: int, rows: int):
        """(arrays as the kernel reads them, their ``row_layout`` words (four per array), the
        ``(copy, input)`` pairs of inputs read through a contiguous copy, refreshed each
        call), or None (the NumPy kernel)."""
        t = self.task
        views, words, refresh = [], [], []
        for a, (arr, kind) in enumerate(zip(list(ins) + list(outs), t.kinds)):
            if arr.dtype != self.np_dtypes[a]:
                return None
            if kind in ("sum", "total", "mean"):  # replaced by per-chunk buffers
                views.append(arr)
                words += (0, 0, 1, 0)
                continue
            if a >= t.n_in and not arr.flags.c_contiguous:
                return None
            if kind in ("param", "scalar"):
                v = np.ascontiguousarray(arr).reshape(-1)
                if not np.shares_memory(v, arr):
                    refresh.append((v, arr))
                views.append(v)
                words += (0, 0, 1, 0)
                continue
            length = 1 if kind in ("stat", "index") else n
            if kind == "block":
                length = _size(arr.shape[arr.ndim - t.row_dims:])
            gather = t.gather[a] if a < t.n_in and t.gather else ()
            m = gather[0] if gather else length
            v = arr.reshape(rows, length)  # a view where the layout allows it, else a copy
            item = v.itemsize
            if (length > 1 and v.strides[1] != item) or v.strides[0] % item:
                v = np.ascontiguousarray(v)
            if np.shares_memory(v, arr):
                views.append(v)
                words += (v.strides[0] // item if rows > 1 else 0, 0, 1, m)
                continue
            if a >= t.n_in:
                return None
            if gather:  # read in place, each row gathered by the kernel if need be
                k = t.row_dims
                lead = row_layout.leading(arr.shape, arr.strides, k, item)
                sub = row_layout.sub_rows(arr.shape, arr.strides, k, item)
                if lead is not None and sub is not None:
                    views.append(arr)
                    words += (*lead, sub)
                    continue
            refresh.append((v, arr))
            views.append(v)
            words += (v.strides[0] // item if rows > 1 else 0, 0, 1, m)
        return views, words, refresh


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
        out[i] = RowKernel.from_library(lib, symbols[i], task,
                                        registry.get(task.op_type).kernel_cpu)
    return out


__all__ = ["RowTask", "RowKernel", "row_task", "emit_row_kernel", "tasks_of", "source_of",
           "row_kernels_for", "PARALLEL_MIN", "ROW_PRELUDE"]
