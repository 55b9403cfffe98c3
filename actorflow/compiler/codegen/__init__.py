"""Generated C kernels for a Plan: the graph compiler's code generator.

``generate(plan)`` looks at every kernel task of a Plan; a task whose work is elementwise
(a fused program, or a single elementwise op) after an optional BLAS prefix
(``region.py``) gets a C function computing its region per element: intermediates stay in
registers, only the task's outputs are written (``emit.py``). All functions of one Plan go
into ONE translation unit, built once with the system C compiler and cached on disk
(``build.py``: flags and why), loaded with ``ctypes``. The Plan then holds, per task, the
generated kernel the actor calls instead of the NumPy one (``kernels.py``); ``Plan.codegen``
reports what was generated (JSON and DOT show it per task: ``TaskProto.generated``).

How an op computes one element is its record's ``c_expr`` (``ops/registry.py``), beside its
NumPy kernel: the generator holds no table of ops. Ops that work row by row (layer_norm and
its gradient, softmax, gelu, reductions over the last axis, cross_entropy and its backward...)
say how they compute one row (``c_row``): ``rows.py`` gives each such task a generated row
loop (its C: ``row_source.py``). Optimizer update tasks (``multi_tensor_update`` or a
single update op) get one loop over all their parameters' flat buffers from their update op's
``c_update`` form (``update.py``), in the same translation unit; a ``multi_tensor_update``
that clips (attrs ``grad_scale``..., set by the ``fuse_clip_grad`` pass) scales each
gradient there. Ops
reducing all elements of several inputs to one value (``grad_norm``) get one pass over them
from their ``c_reduce`` form (``reduce.py``).

Control: generation is on by default; ``ACTORFLOW_GRAPH_CODEGEN=0`` turns it off
(``CompileOptions.codegen``). Results: arithmetic, comparisons, selections and relu are the
NumPy kernels' IEEE operations and give their bits; libm's exp / tanh / log differ from NumPy's
own SIMD versions by an ulp or two in float32, so a graph with generation trains to eager's
losses within float32 rounding (the graph tests: 1e-5 relative, 1e-3 under AMP), and
bit-identically with it off; row kernels reorder their row sums, so they agree with the NumPy
kernels within a few ulps times the row length; update loops give the NumPy kernels' bits.
Tasks with fewer than ``ACTORFLOW_GRAPH_CODEGEN_MIN`` output
elements (default 1) keep their NumPy kernel. No compiler, or a failed build, leaves every
task on its NumPy kernel with one ``CodegenWarning`` saying why.
"""
from __future__ import annotations

import shutil

from actorflow.compiler.codegen import emit, pool, reduce, rows, update
from actorflow.compiler.codegen.build import (CACHE_VAR, FLAGS, CodegenWarning, build, compiler,
                                              stats)
from actorflow.compiler.codegen.kernels import GeneratedKernel, unaliased
from actorflow.compiler.codegen.recompute import recompute
from actorflow.compiler.codegen.region import Region, analyse, program_of
from actorflow.ops import registry
from actorflow.settings import env_int

ENV = "ACTORFLOW_GRAPH_CODEGEN"
MIN_ENV = "ACTORFLOW_GRAPH_CODEGEN_MIN"


def _in_metas(plan, task) -> list:
    metas = []
    for pos, (rid, idx) in enumerate(task.input_blobs):
        _, desc = plan.regst_descs[rid].blobs[idx]
        shape = tuple(desc.shape)
        steps = task.input_views.get(pos)
        if steps:
            shape = tuple(steps[-1][3])
        metas.append((shape, desc.dtype))
    return metas


def _out_metas(plan, task) -> list:
    rid = task.produced_regsts.get("out")
    if rid is None:
        return []
    return [(tuple(d.shape), d.dtype) for _, d in plan.regst_descs[rid].blobs]


def regions(plan, min_elements: int = 1) -> dict:
    """task id -> Region, for each kernel task of ``plan`` a generated kernel can compute."""
    out = {}
    for t in plan.tasks:
        if t.kind != "normal":
            continue
        outs = _out_metas(plan, t)
        if not outs or min(_size(s) for s, _ in outs) < min_elements:
            continue
        prog = program_of(t.op_type, t.attrs, _in_metas(plan, t), outs)
        if prog is None:
            continue
        region = analyse(prog, _in_metas(plan, t))
        if region is not None:
            out[t.task_id] = region
    return out


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def source_of(found: dict) -> tuple:
    """``(C source, task id -> symbol)`` for the regions ``found``; identical kernels (the
    same layers of a model) share one function."""
    parts, symbols = emit.unique_functions(
        {tid: emit.emit_kernel("KERNEL", r.operand_dtypes, r.steps, r.stores, r.pattern())
         for tid, r in found.items()}, "af_k")
    return "\n".join([emit.PRELUDE] + parts), symbols


def generate(plan) -> None:
    """Generate, build and attach the kernels of ``plan`` (see the module docstring); sets
    ``plan.codegen`` and each generated task's ``generated``."""
    min_elements = env_int(MIN_ENV, 1, minimum=1)
    found = regions(plan, min_elements)
    # row kernels (ops with a c_row: normalisations, softmax, gelu...): rows.py
    row_found = rows.tasks_of(plan, found, _in_metas, _out_metas, min_elements)
    updates = _updates(plan, min_elements)  # optimizer updates (codegen/update.py)
    # reductions of all elements of several inputs (grad_norm's c_reduce): reduce.py
    reduced = reduce.tasks_of(plan, {**found, **row_found, **updates}, _in_metas, _out_metas,
                              min_elements)
    report = {"status": "none", "flags": list(FLAGS), "tasks": {}}
    plan.codegen = report
    if not found and not row_found and not updates and not reduced:
        return
    source, symbols = source_of(found)
    row_source, row_symbols = rows.source_of(row_found)
    usource, usymbols = update.source_of(updates)
    rsource, rsymbols = reduce.source_of(reduced)
    lib = build(source + "\n" + row_source + "\n" + usource + "\n" + rsource)
    if lib is None:
        report["status"] = "fallback"
        return
    report["status"] = "built"
    report["library"] = lib._name
    pool.runner()  # the chunk pool's library too, now rather than in the first step's kernel
    kernels = {}
    for t in plan.tasks:
        sym = row_symbols.get(t.task_id)
        if sym is not None:
            kernels[t.task_id] = rows.RowKernel.from_library(
                lib, sym, row_found[t.task_id], registry.get(t.op_type).kernel_cpu)
            t.generated = sym
            report["tasks"][t.op_name] = {"symbol": sym, "ops": [t.op_type], "numpy_prefix": [],
                                          "rows": True}
            continue
        if t.task_id in updates:
            u = updates[t.task_id]
            kernels[t.task_id] = update.kernel(lib, usymbols[t.task_id], u, t.op_type)
            t.generated = usymbols[t.task_id]
            report["tasks"][t.op_name] = {"symbol": t.generated, "ops": update.ops_of(u),
                                          "numpy_prefix": []}
            continue
        if t.task_id in reduced:
            kernels[t.task_id] = reduce.kernel(lib, rsymbols[t.task_id], reduced[t.task_id],
                                               t.op_type)
            t.generated = rsymbols[t.task_id]
            report["tasks"][t.op_name] = {"symbol": t.generated, "ops": [t.op_type],
                                          "numpy_prefix": [], "reduce": True}
            continue
        sym = symbols.get(t.task_id)
        if sym is None:
            continue
        r: Region = found[t.task_id]
        kernels[t.task_id] = GeneratedKernel(getattr(lib, sym), r,
                                             registry.get(t.op_type).kernel_cpu, sym)
        t.generated = sym
        report["tasks"][t.op_name] = {"symbol": sym, "ops": list(r.ops),
                                      "numpy_prefix": [r.ops[s] for s in r.prefix]}
    plan.generated_kernels = kernels


def _updates(plan, min_elements: int = 1) -> dict:
    """task id -> UpdateTask, for each optimizer update task a generated loop computes (over
    at least ``min_elements`` parameter elements)."""
    out = {}
    ops = registry.all_ops()
    for t in plan.tasks:
        op = ops.get(t.op_type) if t.kind == "normal" else None
        if op is not None and (op.name == "multi_tensor_update" or op.optimizer_update):
            metas = _in_metas(plan, t)
            u = update.task_of(t.op_type, t.attrs, metas)
            if u is not None and update.elements(u, metas) >= min_elements:
                out[t.task_id] = u
    return out


def compiler_found() -> bool:
    """Whether the C compiler generation would build with is on ``PATH`` (without one the
    Plan keeps the values generated kernels would recompute: the NumPy kernels run)."""
    return shutil.which(compiler()) is not None


def in_place_of(plan) -> dict:
    """task id -> the ``(output, input)`` pairs its generated kernel may compute in place (for
    the memory plan, ``compiler/memory.py``); empty without generated kernels."""
    got = getattr(plan, "generated_kernels", None) or {}
    return {tid: k.in_place for tid, k in got.items() if getattr(k, "in_place", None)}


def kernels_of(plan) -> dict:
    """task id -> GeneratedKernel of ``plan`` (built now if the Plan says it has generated
    kernels but holds none, e.g. one read back from JSON)."""
    got = getattr(plan, "generated_kernels", None)
    if got is None:
        if any(getattr(t, "generated", "") for t in plan.tasks):
            generate(plan)
        got = getattr(plan, "generated_kernels", None) or {}
        # a task its Plan generated (and may have placed in place) whose kernel did not build
        # now runs its NumPy kernel on inputs no output overlaps
        for t in plan.tasks:
            if getattr(t, "generated", "") and t.task_id not in got:
                got[t.task_id] = _numpy_unaliased(registry.get(t.op_type).kernel_cpu)
        plan.generated_kernels = got
    return got


def _numpy_unaliased(kernel):
    def run(ins: list, outs: list, attrs: dict) -> None:
        kernel(unaliased(ins, outs), outs, attrs)
    return run


__all__ = ["generate", "in_place_of", "compiler_found", "recompute", "kernels_of",
           "kernels_for", "regions", "source_of", "CodegenWarning", "ENV",
           "MIN_ENV", "CACHE_VAR", "stats"]



def kernels_for(items: list) -> list:
    """Generated kernels for ``items`` (``(program, in_metas)`` each: a program in
    ``region.program_of``'s form over inputs of (shape, dtype)), built as ONE translation unit;
    None for an item without a C form, all None without a build (for tests and tools; Plans
    use ``generate``)."""
    found = {}
    for i, (prog, metas) in enumerate(items):
        region = analyse(prog, metas)
        if region is not None:
            found[i] = region
    out: list = [None] * len(items)
    if not found:
        return out
    source, symbols = source_of(found)
    lib = build(source)
    if lib is None:
        return out
    fused = registry.get("fused_elementwise")
    for i, region in found.items():
        prog = items[i][0]
        out[i] = GeneratedKernel(getattr(lib, symbols[i]), region,
                                 lambda ins, outs, attrs, p=prog: fused.kernel_cpu(ins, outs, p),
                                 symbols[i])
    return out
