"""Generated C kernels for optimizer updates: one loop over the flat buffers of all parameters
of a ``multi_tensor_update`` task (or of a single update op's task).

How an update computes one element is its op record's ``c_update`` (``ops/update_form.py``,
set beside the NumPy kernel in ``ops/optim_ops.py``); this module only wraps that body in a
loop. A kernel's signature::

    void name(char **ptr, const int64_t *off, const double *k, int64_t n,
              int64_t start, int64_t stop)

``ptr``: per parameter its param, grad and state pointers; ``off``: the ``n + 1`` offsets of
each parameter in one flat index space over all of them; ``k``: per parameter the form's
scalars (lr, bias corrections...: they change every step, so they are arguments, never in the
source); ``[start, stop)``: the part of the flat index space to update. A call of at least
``PARALLEL_MIN`` elements is split into chunks run in one ``ctypes`` call (the GIL released)
on the C pool's threads (``pool.py``; without it, over ``ops/parallel``'s helpers); elements
are independent and every array of a call must be disjoint from the others (checked), so
chunks never race and the result is the NumPy kernel's, in any order. float32 and float64
parameters with C-contiguous arrays of the parameter's shape and dtype; any other call (a
view, a parameter listed twice, a skipped step) runs the NumPy kernel.

A ``multi_tensor_update`` that scales gradients (attrs ``grad_scale``...: the
``fuse_clip_grad`` pass folded ``clip_grad_by_norm`` into it; the scale op's other inputs, the
total norm, come last) gets one more scalar per parameter, last in ``k``: the factor the scale
op's record computes (its ``grad_scale`` trait, from those inputs' values: the clip
coefficient ``min(max_norm / (norm + 1e-6), 1)``), 1 for a member it does not scale. The loop
loads ``g = g_[j] * c`` with ``c`` converted to ``T`` first, as NumPy's ``g *= coef`` converts
it, so the update sees the bits the scaled gradient would hold (a factor of 1 changes no bit);
the gradient's memory is not written.
"""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

from actorflow.compiler.codegen import pool
from actorflow.compiler.codegen.build import build
from actorflow.compiler.codegen.emit import PRELUDE, unique_functions
from actorflow.ops import registry
from actorflow.ops.fused import scale_inputs
from actorflow.ops.parallel import parallel_for, split, threads

PARALLEL_MIN = 1 << 15   # elements; below it one thread is faster than handing out chunks
_C_TYPES = {"float32": "float", "float64": "double"}
_LR = 2                  # the learning rate's position in an update op's inputs
_ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


class UpdateTask(NamedTuple):
    """What one task's generated update needs: the update op, its attrs and form, the
    parameters' dtype name, whether the task is a ``multi_tensor_update`` (``arity``
    inputs per parameter) or the update op itself (arity 0), and for one that scales
    gradients its ``grad_scale`` op (else None), that op's attrs, the members it scales and
    how many of the task's inputs, last, are that op's."""

    op: object
    attrs: dict
    form: object
    dtype: str
    arity: int
    scale_op: object = None
    scale_attrs: dict | None = None
    scale_params: tuple = ()
    scale_inputs: int = 0


def task_of(op_type: str, attrs: dict, in_metas: list) -> UpdateTask | None:
    """The UpdateTask of a task calling ``op_type`` with ``attrs`` on inputs of
    ``(shape, dtype)``, or None when no generated update computes it."""
    scale: tuple = ()
    if op_type == "multi_tensor_update":
        op, uattrs, arity = registry.get(attrs["update"]), attrs["update_attrs"], attrs["arity"]
        params = [in_metas[i] for i in range(1, len(in_metas) - scale_inputs(attrs), arity)]
        if "grad_scale" in attrs:
            sop = registry.get(attrs["grad_scale"])
            if sop.grad_scale is None:
                return None
            scale = (sop, dict(attrs["grad_scale_attrs"]), tuple(attrs["grad_scale_params"]),
                     scale_inputs(attrs))
    else:
        op = registry.get(op_type)
        uattrs, arity = attrs, 0
        params = in_metas[:1]
    if not op.optimizer_update or op.c_update is None or not params:
        return None
    form = op.c_update(uattrs)
    if form is None:
        return None
    names = {d.name for _, d in params}
    if len(names) != 1 or next(iter(names)) not in _C_TYPES:
        return None
    return UpdateTask(op, dict(uattrs), form, next(iter(names)), arity, *scale)


def ops_of(task: UpdateTask) -> list:
    """The ops a generated update computes (for the Plan's codegen report)."""
    return ([task.scale_op.name] if task.scale_op is not None else []) + [task.op.name]


def elements(task: UpdateTask, in_metas: list) -> int:
    """How many parameter elements ``task`` updates, from its inputs' ``(shape, dtype)``."""
    if task.arity:
        params = in_metas[1:len(in_metas) - task.scale_inputs:task.arity]
    else:
        params = in_metas[:1]
    return sum(int(np.prod(shape, dtype=np.int64)) for shape, _ in params)


def emit(name: str, form, dtype: str, scaled: bool = False) -> str:
    """The C source of the update kernel ``name`` for ``form`` on ``dtype`` parameters;
    ``scaled``: the gradient is multiplied by one more per-parameter scalar (a clip factor)."""
    t = _C_TYPES[dtype]
    states = [f"s{i}" for i in range(form.n_state)]
    arrays = ["p", "g", *states]
    params = ", ".join(f"{'const ' if a == 'g' else ''}{t} *restrict {a}_" for a in arrays)
    names = list(form.names) + (["gscale_"] if scaled else [])
    consts = "".join(f"    const T {n} = (T)k[{i}];\n" for i, n in enumerate(names))
    loads = " ".join(f"T {a} = {a}_[j]{' * gscale_' if scaled and a == 'g' else ''};"
                     for a in arrays)
    stores = " ".join(f"{a}_[j] = {a};" for a in form.writes)
    na, nk = len(arrays), len(names)
    calls = ", ".join(f"({t} *)ptr[i * {na} + {j}]" for j in range(na))
    return (f"#define T {t}\n"
            f"static __attribute__((noinline, optimize(\"tree-vectorize\"))) void {name}_run("
            f"{params}, const double *k, int64_t a, int64_t b) {{\n{consts}"
            f"    for (int64_t j = a; j < b; j++) {{\n"
            f"        {loads}\n        {form.body}\n        {stores}\n    }}\n}}\n"
            f"void {name}(char **ptr, const int64_t *off, const double *k, int64_t n, "
            f"int64_t start, int64_t stop) {{\n"
            f"    for (int64_t i = 0; i < n; i++) {{\n"
            f"        int64_t lo = off[i], hi = off[i + 1];\n"
            f"        if (hi <= start || lo == hi) continue;\n"
            f"        if (lo >= stop) break;\n"
            f"        {name}_run({calls}, k + i * {nk}, (start > lo ? start : lo) - lo,\n"
            f"                   (stop < hi ? stop : hi) - lo);\n"
            f"    }}\n}}\n#undef T\n")


def source_of(found: dict) -> tuple:
    """``(C source, key -> symbol)`` for the UpdateTasks ``found`` (identical kernels share
    one function); the source goes into the Plan's translation unit after ``emit.PRELUDE``."""
    parts, symbols = unique_functions(
        {key: emit("KERNEL", u.form, u.dtype, u.scale_op is not None)
         for key, u in found.items()}, "af_u")
    return "\n".join(parts), symbols


class UpdateKernel:
    """A task's kernel running its generated update loop; the signature of the task's NumPy
    kernel (``kernel(ins, outs, attrs)``), which it calls for what it can't take."""

    def __init__(self, fn, task: UpdateTask, numpy_kernel, symbol: str):
        fn.argtypes = _ARGTYPES
        fn.restype = None
        self.fn = fn
        self.address = pool.address(fn)
        self.task = task
        self.symbol = symbol
        self.numpy_kernel = numpy_kernel
        self.np_dtype = np.dtype(task.dtype)
        self.layouts: dict = {}
        self.calls = 0

    def _blocks(self, ins: list) -> list:
        """Each parameter's inputs in the update op's own layout (param, grad, lr, ...)."""
        arity = self.task.arity
        if not arity:
            return [list(ins)]
        stop = len(ins) - self.task.scale_inputs
        return [[ins[i], ins[i + 1], ins[0], *ins[i + 2:i + arity]]
                for i in range(1, stop, arity)]

    def __call__(self, ins: list, outs: list, attrs: dict) -> None:
        task, form = self.task, self.task.form
        blocks = self._blocks(ins)
        if task.attrs.get("skip_if", False):
            if any(bool(b[-1].reshape(())) for b in blocks):
                self.numpy_kernel(ins, outs, attrs)  # skipped steps: the reference handles them
                return
            blocks = [b[:-1] for b in blocks]
        first = 4 if form.has_step else 3
        arrays = [a for b in blocks for a in (b[0], b[1], *b[first:])]
        key = tuple(map(id, arrays))
        layout = self.layouts.get(key)
        if layout is None:
            layout = self._layout(blocks, arrays, first)
            if len(self.layouts) > 16:
                self.layouts.clear()
            self.layouts[key] = layout
        if layout is False:
            self.numpy_kernel(ins, outs, attrs)
            return
        ptrs, off, total, _held = layout
        lr = float(blocks[0][_LR])
        nk = len(form.names)
        clip = task.scale_op is not None
        k = np.empty((len(blocks), nk + clip), np.float64)
        for i, b in enumerate(blocks):
            t = None
            if form.has_step:
                step = b[3]
                step[...] += 1
                t = int(step.reshape(()))
            k[i, :nk] = form.scalars(float(b[_LR]) if task.arity == 0 else lr, t, task.attrs)
        if clip:  # the scale op's factor (a clip coefficient) for its members, 1 elsewhere
            values = [float(a.reshape(())) for a in ins[len(ins) - task.scale_inputs:]]
            k[:, nk] = 1.0
            k[list(task.scale_params), nk] = task.scale_op.grad_scale(values, task.scale_attrs)
        if total == 0:
            return
        self.calls += 1
        fn, n, kp = self.fn, len(blocks), k.ctypes.data
        if total >= PARALLEL_MIN and threads() > 1:
            chunks = split(total, PARALLEL_MIN // 2)
            if not pool.run_update(self.address, ptrs, off, kp, n, chunks):
                parallel_for(len(chunks), lambda c: fn(ptrs, off, kp, n, *chunks[c]))
        else:
            fn(ptrs, off, kp, n, 0, total)

    def _layout(self, blocks: list, arrays: list, first: int):
        """``(pointers, offsets, elements, arrays held)`` of a call, or False (NumPy)."""
        n_state = self.task.form.n_state
        spans = []
        for b in blocks:
            p = b[0]
            if len(b) != first + n_state:
                return False
            for a in (b[0], b[1], *b[first:]):
                if a.dtype != self.np_dtype or a.shape != p.shape or not a.flags.c_contiguous:
                    return False
                if a.size:
                    lo = a.ctypes.data
                    spans.append((lo, lo + a.nbytes))
        spans.sort()
        for (_, hi), (lo, _) in zip(spans, spans[1:]):
            if lo < hi:  # arrays overlap (a parameter listed twice, shared state): in order
                return False
        sizes = [b[0].size for b in blocks]
        off = np.zeros(len(blocks) + 1, np.int64)
        np.cumsum(sizes, out=off[1:])
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        return ptrs, off.ctypes.data, int(off[-1]), (list(arrays), off)


def kernel(lib, symbol: str, task: UpdateTask, op_type: str) -> UpdateKernel:
    """The UpdateKernel calling ``symbol`` of ``lib`` for ``task`` (a task of ``op_type``)."""
    return UpdateKernel(getattr(lib, symbol), task, registry.get(op_type).kernel_cpu, symbol)


def kernels_for(items: list) -> list:
    """Built UpdateKernels for ``items`` (``(op_type, attrs, in_metas)`` each), as ONE
    translation unit; None for an item without a generated update, all None without a build
    (for tests and tools; Plans use ``codegen.generate``)."""
    found = {}
    for i, (op_type, attrs, metas) in enumerate(items):
        task = task_of(op_type, attrs, metas)
        if task is not None:
            found[i] = task
    out: list = [None] * len(items)
    if not found:
        return out
    source, symbols = source_of(found)
    lib = build(PRELUDE + "\n" + source)
    if lib is not None:
        for i, task in found.items():
            out[i] = kernel(lib, symbols[i], task, items[i][0])
    return out


def kernel_for(op_type: str, attrs: dict, in_metas: list):
    """``kernels_for`` of one item: an UpdateKernel, or None."""
    return kernels_for([(op_type, attrs, in_metas)])[0]


__all__ = ["UpdateTask", "UpdateKernel", "task_of", "elements", "emit", "source_of", "kernel",
           "kernel_for", "kernels_for", "PARALLEL_MIN"]
