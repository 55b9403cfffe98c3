"""What a training ``nn.Graph`` bakes into its Job besides the inputs and the state tensors:
each optimizer's hyperparameters other than the learning rate (the update ops' attrs), its
param groups, and which parameters are trained (``requires_grad``).

A compiled signature remembers a ``training_key`` of these; a call whose key differs (the user
set ``weight_decay``, ``momentum``, ``betas``..., froze a parameter, called
``add_param_group``) compiles again, and ``describe_change`` is the reason kept in the graph's
``compile_log``. Gradient hooks on a trained parameter are refused (a Job does not run Python
hooks): ``check_hooks`` says which parameter.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor

_CLIP_KEYS = ("clip_grad_max_norm", "clip_grad_norm_type")


def _frozen(v):
    """``v`` as a hashable value (lists and tuples become tuples, arrays their bytes)."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def sync_lr_tensors(entry) -> None:
    """Give every param group of ``entry``'s optimizer a learning-rate tensor (a group added
    with ``add_param_group`` after ``add_optimizer`` has none yet)."""
    while len(entry.lr_tensors) < len(entry.optimizer.param_groups):
        entry.lr_tensors.append(Tensor._wrap(np.zeros((), np.float64), dt.float64))


def trained_parameters(graph) -> list:
    """``(name, parameter)`` of every parameter of the graph's modules (each once)."""
    return [(name, p) for name, kind, p in graph._state_names().values() if kind == "parameter"]


def training_key(graph, params: list) -> tuple:
    """What the graph's compiled update depends on besides tensors: per optimizer and param
    group, its update attrs, clipping options and parameters; per parameter of ``params``
    (``(name, tensor)``), whether it requires grad."""
    opts = []
    for entry in graph._optimizers:
        opt = entry.optimizer
        groups = []
        for g in opt.param_groups:
            attrs = tuple(sorted((k, _frozen(v)) for k, v in opt._attrs(g).items()))
            clip = tuple(_frozen(g.get(k)) for k in _CLIP_KEYS)
            groups.append((attrs, clip, tuple(id(p) for p in g["params"])))
        opts.append(tuple(groups))
    return tuple(opts), tuple(bool(p.requires_grad) for _, p in params)


def describe_change(old: tuple, new: tuple, params: list) -> str:
    """The sentence for ``compile_log``: how training key ``new`` differs from ``old``."""
    (old_opts, old_rg), (new_opts, new_rg) = old, new
    said = []
    for k, (og, ng) in enumerate(zip(old_opts, new_opts)):
        if len(ng) != len(og):
            said.append(f"optimizer {k} has {len(ng)} param groups, was {len(og)} "
                        f"(add_param_group)")
            continue
        for j, (a, b) in enumerate(zip(og, ng)):
            if a[0] != b[0]:
                before, after = dict(a[0]), dict(b[0])
                diff = [f"{key} {before.get(key)!r} -> {after.get(key)!r}"
                        for key in sorted(set(before) | set(after))
                        if before.get(key) != after.get(key)]
                said.append(f"optimizer {k} group {j} hyperparameters changed: "
                            + ", ".join(diff))
            if a[1] != b[1]:
                said.append(f"optimizer {k} group {j} gradient clipping changed: {a[1]} -> {b[1]}")
            if a[2] != b[2]:
                said.append(f"optimizer {k} group {j} parameters changed")
    for (name, _), a, b in zip(params, old_rg, new_rg):
        if a != b:
            said.append(f"parameter {name} requires_grad {a} -> {b}")
    if len(old_rg) != len(new_rg):
        said.append("the graph's parameters changed")
    return "; ".join(said[:4]) + (f" (+{len(said) - 4} more)" if len(said) > 4 else "") \
        if said else "training state changed"


def check_hooks(graph, params: list) -> None:
    """Raise when a parameter the graph trains has a gradient hook: the compiled Job computes
    gradients without running Python hooks, so the hook would be silently skipped."""
    for name, p in params:
        if not p.requires_grad:
            continue
        hooks = getattr(p, "_hooks", None) or p.__dict__.get("_post_accumulate_grad_hooks")
        if hooks:
            raise RuntimeError(
                f"nn.Graph {graph.name}: parameter {name} has a gradient hook "
                f"(register_hook / register_post_accumulate_grad_hook); a graph computes "
                f"gradients in its compiled Job and can't run Python hooks: remove the hook "
                f"(handle.remove()) or train this model eagerly")
