"""Why an ``nn.Graph`` compiles a call again rather than reuse a compiled signature: the reason
kept in ``graph.compile_log`` (``compile_reason``: first call, a module's training mode, an
argument's shape or structure), a bound state tensor replaced or reshaped since
(``stale_binding``), or the training state the update baked in changed (``training_changed``,
see ``train_state``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from actorflow.dispatch.lazy_global import physical
from actorflow.nn.graph import args_tree, train_state
from actorflow.nn.graph.compiled import CompiledGraph
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

if TYPE_CHECKING:
    from actorflow.nn.graph.graph import Graph


def compile_reason(graph: "Graph", sig: tuple, named: list, paths: list) -> str:
    """Why ``graph`` compiles call signature ``sig`` now (``named``, ``paths``: its arguments'
    names and leaf paths), appended to its ``compile_log``; "first call" is not logged."""
    pending = graph._pending_reason
    graph.__dict__["_pending_reason"] = None
    prev = graph._last
    if prev is None and pending is None:
        return "first call"
    if pending is not None:
        why = pending
    elif prev.signature[1] != sig[1]:
        why = "module training mode changed: " + _mode_diff(graph, prev.signature[1], sig[1])
    else:
        why = args_tree.describe_difference(prev.signature[0], sig[0], prev.named_args,
                                            named, paths)
    graph._compile_log.append(why)
    return why


def _mode_diff(graph: "Graph", old: tuple, new: tuple) -> str:
    mods = graph._mode_modules or []
    names = {}
    for gname, proxy in graph._modules.items():
        for mname, m in proxy.to(Module).named_modules(prefix=gname):
            names.setdefault(id(m), mname)
    changed = [f"{names.get(id(m), type(m).__name__)} "
               f"{'train' if a else 'eval'} -> {'train' if b else 'eval'}"
               for m, a, b in zip(mods, old, new) if a != b]
    more = f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""
    return ", ".join(changed[:4]) + more


def stale_binding(graph: "Graph", compiled: CompiledGraph) -> str | None:
    """Why ``compiled`` can't run on the current state (a parameter, buffer or optimizer
    state tensor it bound was replaced, or a bound tensor changed shape or dtype), or
    None when every binding still holds."""
    current = {name: t for name, _kind, t in graph._state_names().values()}
    for entry in graph._optimizers:
        for p, state in entry.optimizer.state.items():
            for key, v in state.items():
                if isinstance(v, Tensor):
                    current[f"{graph._param_name(p)}.{key}"] = v
    for o in compiled.full_job.ops_of_type("variable"):
        name, kind = o.attrs["name"], o.attrs.get("kind")
        bound = compiled.bindings.get(name)
        if kind in ("parameter", "buffer", "optimizer_state"):
            now = current.get(name)
            if now is None:
                return f"{kind} {name} is no longer part of the graph's state"
            if now is not bound:
                return f"{kind} {name} was replaced by another tensor"
        desc = o.outputs[0]
        bound = physical(bound)  # a global tensor's shard is what the Job holds
        if bound is not None and (tuple(bound._shape) != tuple(desc.shape)
                                  or bound.dtype is not desc.dtype):
            return (f"{kind} {name} changed from {tuple(desc.shape)} {desc.dtype} to "
                    f"{tuple(bound._shape)} {bound.dtype}")
    return None


def training_changed(graph: "Graph", compiled: CompiledGraph) -> str | None:
    """Why ``compiled``'s update no longer matches the optimizers and parameters (see
    ``train_state``), or None; raises when a trained parameter got a gradient hook."""
    params = compiled.train_params
    train_state.check_hooks(graph, params)
    key = train_state.training_key(graph, params)
    if key == compiled.train_key:
        return None
    return train_state.describe_change(compiled.train_key, key, params)
