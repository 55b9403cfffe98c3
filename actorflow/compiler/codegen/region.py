"""Which part of a task a generated kernel computes.

A task is a *program* (``ops/fused.py``: fused_elementwise, fused_matmul_bias_act,
fused_add_to_output) or a single elementwise op, seen as a one-step program. Its steps split
into a *prefix* of steps without a C form (a matmul, linear or convolution: BLAS stays BLAS),
run by their NumPy kernels first, and an elementwise *region* of steps with a C form, computed
per element in one generated loop. A task qualifies when:

* every region step has a ``c_expr`` for its attrs and one output, and every value the region
  reads or writes has a dtype the generator supports (``emit.supported``);
* prefix steps come first and read only the task's inputs and earlier prefix results;
* every value the region exports (the task's outputs it writes) has the iteration shape, the
  shape of the last step (so each output element is written exactly once).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from actorflow.compiler.codegen import emit
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.ops.fused import buffer_plan

PROGRAM_OPS = ("fused_elementwise", "fused_matmul_bias_act", "fused_add_to_output")


@dataclass
class Region:
    """What one generated kernel computes (see the module docstring)."""

    program: dict                       # program attrs (ops, op_attrs, args, shapes, ...)
    n_in: int
    prefix: list                        # step indices run by NumPy kernels, in order
    operands: list                      # value refs the C loop reads (inputs, prefix results)
    operand_dtypes: list
    operand_shapes: list
    steps: list                         # (C expression, dtype) per region step
    stores: list                        # (output index, region step index, dtype)
    shape: tuple                        # iteration shape
    ops: list = field(default_factory=list)  # op names of every step (for the Plan)

    def pattern(self) -> tuple:
        return emit.fast_pattern(self.shape, self.operand_shapes, len(self.stores))


def program_of(op_type: str, attrs: dict, in_metas: list, out_metas: list) -> dict | None:
    """The program attrs of a task: its own for a program op, a one-step program for a
    single-output elementwise op, else None."""
    if op_type in PROGRAM_OPS:
        return attrs
    op = registry.get(op_type)
    if not op.elementwise or op.c_expr is None or len(out_metas) != 1 or op.random:
        return None
    if op.mutated_inputs(len(in_metas), attrs):
        return None
    return {"ops": [op_type], "op_attrs": [dict(attrs)], "args": [list(range(len(in_metas)))],
            "shapes": [tuple(out_metas[0][0])], "dtypes": [out_metas[0][1]], "exports": [0],
            "parts": [op_type]}


def analyse(prog: dict, in_metas: list) -> Region | None:
    """The Region of a program over inputs of ``in_metas`` ((shape, dtype) each), or None when
    it does not qualify."""
    n_in = len(in_metas)
    ops, args = prog["ops"], prog["args"]
    shapes, dtypes = [tuple(s) for s in prog["shapes"]], prog["dtypes"]
    k = len(ops)
    forms = []
    for s in range(k):
        op = registry.get(ops[s])
        forms.append(op.c_form(prog["op_attrs"][s]) if op.elementwise else None)
    first = next((s for s in range(k) if forms[s] is not None), None)
    if first is None or any(f is None for f in forms[first:]):
        return None
    prefix = list(range(first))
    if any(r >= n_in + first for s in prefix for r in args[s]):
        return None
    shape = shapes[-1]
    exports = prog["exports"]
    if any(e >= first and shapes[e] != shape for e in exports):
        return None
    meta = [(tuple(m[0]), m[1]) for m in in_metas] + list(zip(shapes, dtypes))
    operands: list = []
    names: dict = {}
    steps = []
    for s in range(first, k):
        refs = []
        for r in args[s]:
            if r >= n_in + first:
                refs.append(("v", r - n_in - first))
                continue
            if r not in names:
                names[r] = len(operands)
                operands.append(r)
            refs.append(("a", names[r]))
        expr = _fill(forms[s], refs, meta, args[s], prog["op_attrs"][s], dtypes[s])
        if expr is None:
            return None
        steps.append((expr, dtypes[s]))
    if not all(emit.supported(meta[r][1]) for r in operands) or not all(
            emit.supported(d) for d in dtypes[first:]):
        return None
    if len(shape) > emit.MAX_DIMS or any(len(meta[r][0]) > len(shape) for r in operands):
        return None
    stores = [(j, e - first, dtypes[e]) for j, e in enumerate(exports) if e >= first]
    return Region(prog, n_in, prefix, operands, [meta[r][1] for r in operands],
                  [meta[r][0] for r in operands], steps, stores, shape, list(ops))


def _fill(template: str, refs: list, meta: list, arg_refs: list, attrs: dict, out_dtype):
    """``template`` with its placeholders replaced (see ``ops/registry.py``: c_expr)."""
    if not emit.supported(out_dtype) or not all(
            emit.supported(meta[r][1]) for r in arg_refs):
        return None
    ct = emit.value_type(out_dtype)
    raw = [f"a{i}" if kind == "a" else f"v{i}" for kind, i in refs]
    cast = [f"(({ct})({x}))" for x in raw]
    # a scalar meets the input's dtype where the result is bool (comparisons), else the result's
    lit_dtype = meta[arg_refs[0]][1] if out_dtype.name == "bool" and arg_refs else out_dtype
    if not emit.supported(lit_dtype):
        return None
    lits = {}
    for name, v in attrs.items():
        if isinstance(v, (bool, int, float)):
            # a bool tensor meets a number as NumPy's default float does (True < 1.5)
            keep = lit_dtype.name != "bool" or isinstance(v, bool)
            lits[name] = emit.literal(v, lit_dtype if keep else dt.float64)
    try:
        return template.format(*cast, T=ct, **{f"r{i}": x for i, x in enumerate(raw)}, **lits)
    except (KeyError, IndexError, ValueError):
        return None


def numpy_buffers(region: Region) -> list:
    """``buffer_plan`` of the whole program (the prefix steps write where the NumPy kernel of
    the program would have them write)."""
    return buffer_plan(region.n_in, region.program)


__all__ = ["Region", "analyse", "program_of", "numpy_buffers", "PROGRAM_OPS"]
