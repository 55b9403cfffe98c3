"""Graphviz DOT rendering of a Job."""
from __future__ import annotations

from actorflow.job.job import Job, split_blob
from actorflow.job.system_ops import system_op

def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def job_to_dot(job: Job) -> str:
    """Ops as nodes (clustered by module scope; an op of a distributed graph shows its placement
    and sbp), blobs as edges labelled with shape and dtype, control edges dashed."""
    lines = [f"digraph {_q(job.name)} {{", "  rankdir=TB;",
             '  node [shape=box, fontsize=10, fontname="Helvetica"];',
             "  edge [fontsize=8];"]
    by_scope: dict = {}
    for o in job.ops:
        by_scope.setdefault(o.scope, []).append(o)
    for k, (scope, ops) in enumerate(by_scope.items()):
        indent = "  "
        if scope:
            lines.append(f"  subgraph cluster_{k} {{")
            lines.append(f"    label={_q(scope)}; style=rounded; color=gray;")
            indent = "    "
        for o in ops:
            label = f"{o.name}\\n{o.op_type}"
            g = o.tags.get("global")
            if g is not None:  # a distributed graph's op: placement and sbp in -> out
                label += (f"\\n{g['placement']} {','.join(g['in'])}"
                          f"{' -> ' if g['in'] else ''}{','.join(g['out'])}")
            row = system_op(o.op_type)
            shape = row.dot_shape if row is not None else "box"
            lines.append(f"{indent}{_q(o.name)} [label={_q(label)}, shape={shape}];")
        if scope:
            lines.append("  }")
    descs = {o.name: o.outputs for o in job.ops}
    for o in job.ops:
        for b in o.inputs:
            src, idx = split_blob(b)
            d = descs[src][idx]
            label = f"{tuple(d.shape)} {d.dtype.name}"
            lines.append(f"  {_q(src)} -> {_q(o.name)} [label={_q(label)}];")
        for c in o.ctrl_inputs:
            lines.append(f"  {_q(c)} -> {_q(o.name)} [style=dashed, color=gray];")
    lines.append("}")
    return "\n".join(lines) + "\n"
