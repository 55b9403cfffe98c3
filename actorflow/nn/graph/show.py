"""``print(graph)``: the module tree with each module's input/output shapes, parameters and
ops, in the layout OneFlow users know."""
from __future__ import annotations

from actorflow.nn.module import Module


def graph_repr(graph) -> str:
    compiled = graph.__dict__.get("_last")
    job = compiled.full_job if compiled is not None else None
    by_scope: dict = {}
    if job is not None:
        for o in job.ops:
            by_scope.setdefault(o.scope, []).append(o)
    lines = [f"(GRAPH:{graph.name}:{type(graph).__name__}): ("]
    lines.append(f"  (CONFIG:config:{graph.config!r})")
    if job is not None:
        for o in job.inputs:
            d = o.outputs[0]
            lines.append(f"  (INPUT:{o.attrs['path']}:tensor(..., size={tuple(d.shape)}, "
                         f"dtype={d.dtype!r}))")
    for proxy in graph._modules.values():
        _module_lines(proxy, by_scope, "  ", lines)
    if job is not None:
        for o in job.outputs:
            d = o.outputs[0]
            lines.append(f"  (OUTPUT:{o.attrs['path']}:tensor(..., size={tuple(d.shape)}, "
                         f"dtype={d.dtype!r}))")
    lines.append(")")
    return "\n".join(lines)


def _module_lines(proxy, by_scope: dict, indent: str, lines: list) -> None:
    gm = proxy._of_gm
    m = proxy.to(Module)
    head = m._get_name() + "(" + m.extra_repr() + ")" if hasattr(m, "extra_repr") else \
        type(m).__name__
    lines.append(f"{indent}(MODULE:{gm.path}:{head}): (")
    inner = indent + "  "
    for shape, dtype in gm.ins:
        lines.append(f"{inner}(INPUT:tensor(..., size={shape}, dtype={dtype}))")
    for pname, p in m._parameters.items():
        if p is not None:
            lines.append(f"{inner}(PARAMETER:{gm.path}.{pname}:tensor(..., size="
                         f"{tuple(p._shape)}, dtype={p.dtype!r}, requires_grad="
                         f"{p.requires_grad}))")
    for bname, t in m._buffers.items():
        if t is not None:
            lines.append(f"{inner}(BUFFER:{gm.path}.{bname}:tensor(..., size={tuple(t._shape)}, "
                         f"dtype={t.dtype!r}))")
    for o in by_scope.get(gm.path, ()):
        ins = ", ".join(o.inputs)
        outs = ", ".join(f"size={tuple(d.shape)}, dtype={d.dtype!r}" for d in o.outputs)
        lines.append(f"{inner}(OPERATOR: {o.name}({ins}) -> ({outs}))")
    for child in proxy._modules.values():
        if child is not None:
            _module_lines(child, by_scope, inner, lines)
    for shape, dtype in gm.outs:
        lines.append(f"{inner}(OUTPUT:tensor(..., size={shape}, dtype={dtype}))")
    lines.append(f"{indent})")
