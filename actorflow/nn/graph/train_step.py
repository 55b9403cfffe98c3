"""The training step of a training ``nn.Graph``: how many updates it has run (OneFlow's
``System-Train-TrainStep``, an int64 tensor of shape ``(1,)``).

Like OneFlow's ``AutoTrainStep`` pass, the count is state of the Job rather than of the host:
the optimizer step (``optimizer_emission``) reads the variable ``System-Train-TrainStep``,
adds one and assigns it back after the update ops (control edges: a call that fails first
counts nothing), once per call (a post-stage op, so a call with gradient accumulation counts
one step), and with float16 AMP only when the step was not skipped for a non-finite gradient
(OneFlow's ``assign_if_not``). The tensor is bound like any variable, so
a call that has not run yet has not counted (an eager read waits for it), no call recompiles
for it, and ``load_state_dict`` writes it in place.

A graph whose parameters are global holds it global and broadcast: on its parameters'
placement when they share one, else on the union of their ranks (OneFlow places it on rank
0's CPU; broadcast on every rank of the graph lets each rank read it without a transfer).
A graph without optimizers has none.
"""
from __future__ import annotations

import numpy as np

from actorflow.autograd import no_grad
from actorflow.dispatch.global_tensor import from_full
from actorflow.framework import dtype as dt
from actorflow.framework.placement import placement
from actorflow.framework.sbp_parallel import broadcast
from actorflow.tensor import Tensor

NAME = "System-Train-TrainStep"
KIND = "train_step"  # the variable op's kind


def train_step(graph) -> Tensor | None:
    """The step tensor of ``graph`` (made, zero, on first use), or None without optimizers.
    Parameters made global (or moved) since it was made move it too, keeping its count."""
    if not graph._optimizers:
        return None
    t = graph.__dict__.get("_train_step")
    where = _placement(graph)
    if t is None or (t.placement if t.is_global else None) != where:
        count = np.zeros((1,), np.int64) if t is None else t.numpy().astype(np.int64)
        t = Tensor._wrap(count, dt.int64)
        if where is not None:
            t = from_full(t, where, (broadcast,) * len(where.hierarchy), NAME)
        graph.__dict__["_train_step"] = t
    return t


def _placement(graph):
    """Where a global graph's step lives (see the module docstring); None for a local one."""
    places = []
    for entry in graph._optimizers:
        for group in entry.optimizer.param_groups:
            for p in group["params"]:
                if p.is_global and p.placement not in places:
                    places.append(p.placement)
    if not places:
        return None
    if len(places) == 1:
        return places[0]
    ranks = sorted({int(r) for pl in places for r in pl.ranks.reshape(-1)})
    return placement(places[0].type, ranks)


def namer(step: Tensor, fallback):
    """``fallback`` (a tracer's namer) that also names ``step``, a graph's step tensor."""

    def name(t):
        if t is step:
            return NAME, KIND
        return fallback(t) if fallback is not None else None

    return name


def emit_increment(b, step: Tensor, updates: list, skipped=None) -> None:
    """Into builder ``b``'s Job: ``step += 1`` once the ops ``updates`` (the update ops' confs)
    have run, so that a call failing before its update counts no step; with ``skipped`` (a
    lazy bool, true when the update did nothing) ``step += 0``."""
    from actorflow.functional import where
    from actorflow.job.system_ops import system_op
    from actorflow.ops import registry

    writers = [o.name for o in updates if system_op(o.op_type) is None
               and registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs)]
    start = len(b.job.ops)
    step.add_(1 if skipped is None else where(skipped, 0, 1))  # (add_: no copy op)
    for o in b.job.ops[start:]:
        if o.op_type != "variable":
            o.ctrl_inputs.extend(w for w in writers if w not in o.ctrl_inputs)


def load(graph, v) -> None:
    """Write the saved step ``v`` (a tensor of shape ``(1,)``, local or global, or an int)
    into ``graph``'s step tensor, in place."""
    t = train_step(graph)
    if isinstance(v, Tensor):
        if tuple(v._shape) != (1,) or v.dtype.is_differentiable:
            raise ValueError(f"{graph.name}.load_state_dict: {NAME} must be an integer tensor "
                             f"of shape (1,), got shape {tuple(v._shape)} {v.dtype}")
        arr = v.numpy()  # (a global value: its logical values, a collective)
    elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        arr = np.array([v])
    else:
        raise TypeError(f"{graph.name}.load_state_dict: {NAME} must be a tensor of shape (1,), "
                        f"got {type(v).__name__}")
    src = Tensor._wrap(np.asarray(arr, np.int64).reshape(1), dt.int64)
    if t.is_global:
        src = from_full(src, t.placement, t.sbp, NAME)
    with no_grad():
        t.copy_(src)
