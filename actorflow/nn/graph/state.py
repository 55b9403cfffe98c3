"""A Graph's state dict: its modules' states, its optimizers' and schedulers' states."""
from __future__ import annotations

from collections import OrderedDict

from actorflow.nn.module import Module

_OPT = "_optimizer"
_SCH = "_lr_scheduler"


def graph_state_dict(graph, destination=None) -> dict:
    """``{module name: module.state_dict(), "_optimizer<k>": ..., "_lr_scheduler<k>": ...}``."""
    out = OrderedDict() if destination is None else destination
    for name, proxy in graph._modules.items():
        out[name] = proxy.to(Module).state_dict()
    for k, entry in enumerate(graph._optimizers):
        out[f"{_OPT}{k}"] = entry.optimizer.state_dict()
        if entry.lr_scheduler is not None:
            out[f"{_SCH}{k}"] = entry.lr_scheduler.state_dict()
    return out


def graph_load_state_dict(graph, state_dict: dict, strict: bool = True) -> None:
    """Load what ``graph_state_dict`` produced. With ``strict``, missing or unexpected top-level
    entries raise KeyError; each module loads with the same ``strict``."""
    expected = set(graph._modules)
    for k, entry in enumerate(graph._optimizers):
        expected.add(f"{_OPT}{k}")
        if entry.lr_scheduler is not None:
            expected.add(f"{_SCH}{k}")
    if strict:
        missing = sorted(expected - set(state_dict))
        unexpected = sorted(set(state_dict) - expected)
        if missing or unexpected:
            raise KeyError(f"{graph.name}.load_state_dict: missing entries {missing}, "
                           f"unexpected entries {unexpected}")
    for name, proxy in graph._modules.items():
        if name in state_dict:
            proxy.to(Module).load_state_dict(state_dict[name], strict=strict)
    for k, entry in enumerate(graph._optimizers):
        if f"{_OPT}{k}" in state_dict:
            entry.optimizer.load_state_dict(state_dict[f"{_OPT}{k}"])
        if entry.lr_scheduler is not None and f"{_SCH}{k}" in state_dict:
            entry.lr_scheduler.load_state_dict(state_dict[f"{_SCH}{k}"])
    # optimizer state tensors were replaced: compiled jobs bound the old ones
    graph._cache.clear()
    graph.__dict__["_last"] = None
