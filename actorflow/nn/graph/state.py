"""A Graph's state dict: its modules' states, its optimizers' and schedulers' states, and a
training graph's step count (``train_step``)."""
from __future__ import annotations

from collections import OrderedDict

from actorflow.nn.module import Module
from actorflow.nn.graph import train_step
from actorflow.nn.graph.optimizer_emission import grad_scaler, uses_grad_scaler

_OPT = "_optimizer"
_SCH = "_lr_scheduler"
_SCALER = "_grad_scaler"  # optional: the float16 AMP loss scale (nn/graph/optimizer_emission.py)


def graph_state_dict(graph, destination=None) -> dict:
    """``{module name: module.state_dict(), "_optimizer<k>": ..., "_lr_scheduler<k>": ...,
    "System-Train-TrainStep": int64 tensor (1,)}`` (the step of a graph with optimizers only:
    the graph's own tensor, as the parameters are)."""
    out = OrderedDict() if destination is None else destination
    for name, proxy in graph._modules.items():
        out[name] = proxy.to(Module).state_dict()
    for k, entry in enumerate(graph._optimizers):
        out[f"{_OPT}{k}"] = entry.optimizer.state_dict()
        if entry.lr_scheduler is not None:
            out[f"{_SCH}{k}"] = entry.lr_scheduler.state_dict()
    scaler = _grad_scaler(graph)
    if scaler is not None:
        out[_SCALER] = scaler.state_dict()
    step = train_step.train_step(graph)
    if step is not None:
        out[train_step.NAME] = step
    return out


def _grad_scaler(graph):
    """The graph's GradScaler state when it trains with float16 AMP (else None)."""
    if graph._optimizers and uses_grad_scaler(graph.config):
        return grad_scaler(graph, create=True)
    return grad_scaler(graph)


def graph_load_state_dict(graph, state_dict: dict, strict: bool = True) -> None:
    """Load what ``graph_state_dict`` produced. With ``strict``, missing or unexpected top-level
    entries raise KeyError (a training graph expects its step: a state dict without one is not
    a whole training state); each module loads with the same ``strict``."""
    expected = set(graph._modules)
    if graph._optimizers:
        expected.add(train_step.NAME)
    for k, entry in enumerate(graph._optimizers):
        expected.add(f"{_OPT}{k}")
        if entry.lr_scheduler is not None:
            expected.add(f"{_SCH}{k}")
    if strict:
        missing = sorted(expected - set(state_dict))
        unexpected = sorted(set(state_dict) - expected - {_SCALER})
        if missing or unexpected:
            raise KeyError(f"{graph.name}.load_state_dict: missing entries {missing}, "
                           f"unexpected entries {unexpected}")
    if graph._optimizers and train_step.NAME in state_dict:  # (first: it checks its value)
        train_step.load(graph, state_dict[train_step.NAME])
    for name, proxy in graph._modules.items():
        if name in state_dict:
            proxy.to(Module).load_state_dict(state_dict[name], strict=strict)
    for k, entry in enumerate(graph._optimizers):
        if f"{_OPT}{k}" in state_dict:
            entry.optimizer.load_state_dict(state_dict[f"{_OPT}{k}"])
        if entry.lr_scheduler is not None and f"{_SCH}{k}" in state_dict:
            entry.lr_scheduler.load_state_dict(state_dict[f"{_SCH}{k}"])
    if _SCALER in state_dict:
        grad_scaler(graph, create=True).load_state_dict(state_dict[_SCALER])
    # optimizer state tensors were replaced: compiled jobs bound the old ones
    if graph._cache:
        graph.close()
        graph._cache.clear()
        graph.__dict__["_pending_reason"] = "load_state_dict replaced the optimizer state"
