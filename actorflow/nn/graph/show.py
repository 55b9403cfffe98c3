"""What a Graph prints: ``print(graph)`` / ``print(graph.model)`` (the module tree with each
module's input/output shapes, parameters, buffers and ops, in the layout OneFlow users know)
and the ``graph.debug(v)`` compile messages."""
from __future__ import annotations

from actorflow.dispatch.lazy_global import boxing_report
from actorflow.nn.graph import args_tree
from actorflow.nn.module import Module

_MAX_NAMES = 6


def _tensor(shape, dtype) -> str:
    return f"tensor(..., size={tuple(shape)}, dtype={dtype})"


def _compiled_of(graph):
    return graph.__dict__.get("_last") if graph is not None else None


def _job_of(graph):
    """The Job as traced: each module block lists the ops its forward (and the gradient
    rules of those ops) created; the passes' result is summarised at the end."""
    compiled = _compiled_of(graph)
    return compiled.forward_job if compiled is not None else None


def _ops_by_scope(job) -> dict:
    by_scope: dict = {}
    if job is not None:
        for o in job.ops:
            by_scope.setdefault(o.scope, []).append(o)
    return by_scope


def graph_repr(graph) -> str:
    """``print(graph)``: config, inputs, the module tree, ops outside modules, outputs."""
    job = _job_of(graph)
    by_scope = _ops_by_scope(job)
    lines = [f"(GRAPH:{graph.name}:{type(graph).__name__}): ("]
    lines.append(f"  (CONFIG:config:{graph.config!r})")
    if job is not None:
        for o in job.inputs:
            d = o.outputs[0]
            lines.append(f"  (INPUT:{o.attrs['path']}:{_tensor(d.shape, d.dtype)})")
    shown = set()
    for proxy in graph._modules.values():
        _module_lines(proxy, by_scope, "  ", lines, shown)
    rest = [o for s, ops in by_scope.items() if s not in shown for o in ops
            if o.op_type not in ("input", "output", "variable")]
    if rest:
        counts: dict = {}
        for o in rest:
            phase = o.tags.get("phase", "forward")
            counts[phase] = counts.get(phase, 0) + 1
        lines.append("  (OPERATORS outside modules: " +
                     ", ".join(f"{n} {p}" for p, n in counts.items()) + ")")
    if job is not None:
        for o in job.outputs:
            d = o.outputs[0]
            lines.append(f"  (OUTPUT:{o.attrs['path']}:{_tensor(d.shape, d.dtype)})")
        compiled = _compiled_of(graph)
        passes = ", ".join(f"{e['name']} +{len(e['added'])} -{len(e['removed'])} "
                           f"~{len(e['changed'])}" for e in compiled.pass_log
                           if e["added"] or e["removed"] or e["changed"]) or "no changes"
        lines.append(f"  (JOB: traced {len(job.ops)} ops; after passes "
                     f"{len(compiled.full_job.ops)} ops; passes: {passes})")
    lines.append(")")
    return "\n".join(lines)


def proxy_repr(proxy) -> str:
    """``print(graph.model)``: one module's block."""
    graph = proxy.__dict__["_of_graph"]()
    lines: list = []
    _module_lines(proxy, _ops_by_scope(_job_of(graph)), "", lines, set())
    return "\n".join(lines)


def _module_lines(proxy, by_scope: dict, indent: str, lines: list, shown: set) -> None:
    gm = proxy._of_gm
    m = proxy.to(Module)
    extra = m.extra_repr() if hasattr(m, "extra_repr") else ""
    head = f"{type(m).__name__}({extra})" if "\n" not in extra else type(m).__name__
    flags = []
    if gm.activation_checkpointing:
        flags.append("activation_checkpointing")
    if gm.stage_id is not None:
        flags.append(f"stage={gm.stage_id}")
    shown_flags = f" [{', '.join(flags)}]" if flags else ""
    lines.append(f"{indent}(MODULE:{gm.path}:{head}{shown_flags}): (")
    inner = indent + "  "
    for shape, dtype in gm.ins:
        lines.append(f"{inner}(INPUT:{_tensor(shape, dtype)})")
    for pname, p in m._parameters.items():
        if p is not None:
            lines.append(f"{inner}(PARAMETER:{gm.path}.{pname}:tensor(..., size="
                         f"{tuple(p._shape)}, dtype={p.dtype}, requires_grad="
                         f"{p.requires_grad}))")
    for bname, t in m._buffers.items():
        if t is not None:
            lines.append(f"{inner}(BUFFER:{gm.path}.{bname}:{_tensor(t._shape, t.dtype)})")
    shown.add(gm.path)
    for o in by_scope.get(gm.path, ()):
        if o.op_type in ("variable",):
            continue
        outs = ", ".join(f"size={tuple(d.shape)}, dtype={d.dtype}" for d in o.outputs)
        phase = o.tags.get("phase", "forward")
        tag = "" if phase == "forward" else f" [{phase}]"
        lines.append(f"{inner}(OPERATOR: {o.name}({', '.join(o.inputs)}) -> ({outs}){tag})")
    for child in proxy._modules.values():
        if child is not None:
            _module_lines(child, by_scope, inner, lines, shown)
    for shape, dtype in gm.outs:
        lines.append(f"{inner}(OUTPUT:{_tensor(shape, dtype)})")
    lines.append(f"{indent})")


# -- graph.debug(v) --------------------------------------------------------------------------------

def describe_inputs(compiled) -> str:
    """``x: (8, 3) float32, y: (8,) int64`` for a compiled signature."""
    tsig = compiled.signature[0][1]
    # (a global input's "device" is its placement and sbp)
    parts = [f"{p}: {tuple(s[0])} {s[1]}" + (f" on {s[2]}" if " " in s[2] else "")
             for p, s in zip(compiled.input_paths, tsig)]
    consts = _constants(compiled.named_args)
    if consts:
        parts.append("constants " + ", ".join(consts))
    text = ", ".join(parts) or "no tensor inputs"
    return text if len(text) < 300 else text[:297] + "..."


def _constants(named) -> list:
    return [f"{p}={leaf[1]!r}" for name, s in named
            for p, leaf in args_tree.iter_leaves(s, name) if leaf[0] == "value"]


def debug_compile(graph, compiled, reason: str, trace_s: float, passes_s: float,
                  evicted: list) -> None:
    """``debug(1)``: one line per compile (why, inputs, sizes, times) and per eviction."""
    n = graph._compiles
    what = "compile" if n == 1 else "recompile"
    fj, tj = compiled.full_job, compiled.forward_job
    print(f"[{graph.name}] {what} #{n} ({reason}); inputs {describe_inputs(compiled)}; "
          f"traced {len(tj.ops)} ops in {trace_s * 1e3:.1f} ms, {len(compiled.pass_log)} passes "
          f"in {passes_s * 1e3:.1f} ms -> {len(fj.ops)} ops; cache "
          f"{len(graph._cache)}/{graph.config.cache_size}")
    for old in evicted:
        print(f"[{graph.name}] cache full: dropped the graph for inputs {describe_inputs(old)}")
    for line in boxing_report(fj):  # a distributed graph: each boxing it inserted, and why
        print(f"[{graph.name}]   boxing {line}")


def _names(names: list, ops: dict) -> str:
    shown = [f"{n}:{ops[n].op_type}" if n in ops else n for n in names[:_MAX_NAMES]]
    more = f" (+{len(names) - _MAX_NAMES} more)" if len(names) > _MAX_NAMES else ""
    return ", ".join(shown) + more


def debug_passes(graph, compiled) -> None:
    """``debug(2)``: per pass, the ops it added, removed and changed (passes that changed
    nothing share one line)."""
    before = {o.name: o for o in compiled.forward_job.ops}
    after = {o.name: o for o in compiled.full_job.ops}
    idle = []
    for entry in compiled.pass_log:
        if not (entry["added"] or entry["removed"] or entry["changed"]):
            idle.append(entry["name"])
            continue
        print(f"[{graph.name}]   pass {entry['name']}: {entry['summary']} in "
              f"{entry['seconds'] * 1e3:.1f} ms")
        for key, sign, ops in (("added", "+", after), ("removed", "-", before),
                               ("changed", "~", after)):
            if entry[key]:
                print(f"[{graph.name}]     {sign} {_names(entry[key], ops)}")
    if idle:
        print(f"[{graph.name}]   passes without changes: {', '.join(idle)}")
