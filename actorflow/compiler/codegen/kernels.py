"""The Python side of a generated kernel: ``GeneratedKernel(ins, outs, attrs)`` has the
signature of the task's NumPy kernel, so an actor calls either the same way.

A call runs the region's prefix steps with their NumPy kernels (into the buffers the NumPy
program would use), then the generated loop through ``ctypes`` (which releases the GIL while
it runs). Layouts are collapsed once per distinct set of input strides and cached (a Plan's
registers keep their layout, so every iteration after the first hits the cache), and a call
on the arrays of an earlier one (a Plan's registers, or new views of their memory:
``prepared.py``) reuses its pointer array too. A
loop of at least ``PARALLEL_WORK`` work units (elements times a rough per-element cost: a
memory-bound add needs a million elements to gain from a second thread, a loop of libm calls
far fewer; never under ``PARALLEL_MIN`` elements) is split into chunks run in one ``ctypes`` call
on the C pool's threads (``pool.py``; without it, on ``ops/parallel``'s Python helpers, one
call per chunk). No BLAS call runs inside the loop, and a prefix's matmul has returned before
it starts, so the chunks never compete with BLAS's own threads.
An array the loop can't take (a stride that is not a whole number of elements, or a dtype
other than the compiled one) makes that call run the NumPy kernel instead.
"""
from __future__ import annotations

import ctypes
import re

import numpy as np

from actorflow.compiler.codegen import emit, pool
from actorflow.compiler.codegen.prepared import PreparedCalls
from actorflow.compiler.codegen.region import Region, numpy_buffers
from actorflow.ops import registry
from actorflow.ops.parallel import parallel_for, split, threads

PARALLEL_MIN = 1 << 15   # elements; below it one thread is faster than handing out chunks
# work units (elements times each element's cost, ``work_per_element``) below which one thread
# is faster: measured on the 2-core machine, a generated add (memory-bound, 1 unit) gains
# from a second thread at 1M elements (0.155 -> 0.081 ms) and loses at 512K (0.071 -> 0.075)
PARALLEL_WORK = 1 << 20
# libm calls a step may make: each costs about as much as a few dozen arithmetic operations
_CALLS = re.compile(r"\b(?:af_exp|exp|expm1|exp2|log|log1p|log2|log10|tanh|sinh|cosh|erf|erfc|"
                    r"pow|sqrt|cbrt|sin|cos|tan|asin|acos|atan|atan2|lgamma|tgamma|fmod)\s*\(")
_I64P = ctypes.POINTER(ctypes.c_int64)
ARGTYPES = (ctypes.POINTER(ctypes.c_void_p), _I64P, _I64P, ctypes.c_int64, ctypes.c_int64,
            ctypes.c_int64, ctypes.c_int)


class GeneratedKernel:
    """A task's kernel running its generated loop (see the module docstring)."""

    def __init__(self, fn, region: Region, numpy_kernel, symbol: str):
        fn.argtypes = ARGTYPES
        fn.restype = None
        self.fn = fn
        self.address = pool.address(fn)
        self.region = region
        self.symbol = symbol
        self.numpy_kernel = numpy_kernel
        self.pattern = region.pattern()
        self.np_dtypes = [d.np for d in region.operand_dtypes]
        prog = region.program
        self.prefix = [(registry.get(prog["ops"][s]), prog["args"][s], prog["op_attrs"][s],
                        tuple(prog["shapes"][s]), prog["dtypes"][s].np) for s in region.prefix]
        self.buffers = numpy_buffers(region) if region.prefix else []
        self.layouts: dict = {}
        # a call's arrays -> (their pointers, layout) (prepared.py): a Plan's registers are
        # the same arrays every iteration
        self.prepared = PreparedCalls()
        self.calls = 0
        self.in_place = in_place_pairs(region)
        # elements from which a call is split over threads
        self.parallel_min = max(PARALLEL_MIN, PARALLEL_WORK // work_per_element(region))


    def __call__(self, ins: list, outs: list, attrs: dict) -> None:
        r = self.region
        vals = list(ins)
        if self.prefix:
            held: dict = {}
            for s, (op, refs, op_attrs, shape, npd) in enumerate(self.prefix):
                where = self.buffers[s]
                buf = held.get(where)
                if buf is None:
                    buf = outs[where[1]] if where[0] == "o" else np.empty(shape, npd)
                    held[where] = buf
                op.kernel_cpu([vals[i] for i in refs], [buf], op_attrs)
                vals.append(buf)
        arrays = [vals[i] for i in r.operands]
        stored = [outs[j] for j, _, _ in r.stores]
        both = arrays + stored
        hit = self.prepared.get(both)
        if hit is not None:
            ptrs, layout = hit  # the registers of an earlier call: nothing to work out
        else:
            key = tuple((a.shape, a.strides, a.dtype) for a in arrays)
            layout = self.layouts.get(key)
            if layout is None:
                layout = self.layouts[key] = self._layout(arrays, stored)
            if layout is False or any(not o.flags.c_contiguous for o in stored):
                self._numpy(ins, outs, attrs, vals)
                return
            ptrs = (ctypes.c_void_p * len(both))(*[a.ctypes.data for a in both])
            self.prepared.put(both, (ptrs, layout))
        sh, st, nd, total, fast = layout
        if total == 0:
            return
        self.calls += 1
        fn = self.fn
        if total >= self.parallel_min and threads() > 1:
            chunks = split(total, PARALLEL_MIN // 2)
            if not pool.run_elementwise(self.address, ptrs, st, sh, nd, chunks, fast):
                parallel_for(len(chunks), lambda c: fn(ptrs, st, sh, nd, chunks[c][0],
                                                       chunks[c][1], fast))
        else:
            fn(ptrs, st, sh, nd, 0, total, fast)

    def _layout(self, arrays: list, stored: list):
        """``(shape, strides, nd, elements, fast)`` as ctypes values, or False (NumPy)."""
        shape = self.region.shape
        strides = []
        for a, npd, want in zip(arrays, self.np_dtypes, self.region.operand_shapes):
            if a.dtype != npd or tuple(a.shape) != tuple(want):
                return False
            if any(s % a.itemsize for s in a.strides):
                return False
            strides.append(emit.broadcast_strides(shape, a.shape,
                                                  [s // a.itemsize for s in a.strides]))
        for o in stored:
            if tuple(o.shape) != tuple(shape):
                return False
            strides.append(emit.contiguous_strides(shape))
        sh, st = emit.collapse(shape, strides)
        nd = len(sh)
        flat = [s for per in st for s in per]
        fast = int(tuple(per[-1] for per in st) == self.pattern)
        total = int(np.prod(sh)) if all(shape) else 0
        return ((ctypes.c_int64 * nd)(*sh), (ctypes.c_int64 * len(flat))(*flat), nd, total,
                fast)

    def _numpy(self, ins: list, outs: list, attrs: dict, vals: list) -> None:
        """This call on the NumPy kernels (prefix results already computed are recomputed:
        the NumPy program is the reference)."""
        self.numpy_kernel(unaliased(ins, outs), outs, attrs)


def work_per_element(region: Region) -> int:
    """A rough cost of one element of ``region``'s loop: one unit per step, 8 per libm call."""
    return sum(1 + 8 * len(_CALLS.findall(expr)) for expr, _ in region.steps) or 1


def in_place_pairs(region: Region) -> list:
    """``(output, input)`` pairs the generated loop may compute in place (the memory plan may
    put the output over the input): each element's operands are loaded before its outputs are
    stored, so an output may lie over a task input it reads with the iteration's shape and
    its own dtype. None for a task with a NumPy prefix (its BLAS result may be written to an
    output before the loop reads the inputs)."""
    if region.prefix:
        return []
    pairs = []
    for j, _, dtype in region.stores:
        for r, shape, d in zip(region.operands, region.operand_shapes, region.operand_dtypes):
            if r < region.n_in and tuple(shape) == tuple(region.shape) and d == dtype:
                pairs.append((j, r))
    return pairs


def unaliased(ins: list, outs: list) -> list:
    """``ins`` with copies of those sharing memory with an output (a NumPy kernel run on a call
    the memory plan made in place reads its inputs intact)."""
    return [np.array(a) if any(np.shares_memory(a, o) for o in outs) else a for a in ins]


__all__ = ["GeneratedKernel", "PARALLEL_MIN", "PARALLEL_WORK", "in_place_pairs", "unaliased",
           "work_per_element"]
