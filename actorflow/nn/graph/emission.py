"""Ops emitted into a Job by tracing functional calls, for the steps of the pass list that add
computation rather than rewrite it: the optimizer's updates (``optimizer_emission``), the loss
scale of float16 AMP and gradient accumulation's ``1 / n`` on the seed gradients
(``passes.grad_acc`` takes ``emit_after`` from the ``PassContext`` nn.Graph builds)."""
from __future__ import annotations

from actorflow.autograd.grad_mode import no_grad
from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.job.job import Job


def emit_after(job: Job, anchor: str, bindings: dict, phase: str, fn, tags=None,
               namer=None) -> tuple:
    """Emit ops with the functional API (``fn(builder) -> lazy tensor``) and move them right
    after op ``anchor``; returns ``(result blob, names of the new ops)``. New variables are
    bound in ``bindings`` (and may be read by the new ops only: they move with them)."""
    start = len(job.ops)
    b = LazyInterpreter.over(job, bindings, namer=namer, graph_name=job.name)
    b.phase = phase
    with b, no_grad():
        result = fn(b)
    for name, t in b.bindings.items():
        bindings.setdefault(name, t)
    new = job.ops[start:]
    del job.ops[start:]
    pos = next(i for i, o in enumerate(job.ops) if o.name == anchor) + 1
    for o in new:
        if tags:
            o.tags.update(tags)
    job.ops[pos:pos] = new
    return result._h.name, {o.name for o in new}


class PassContext:
    """What passes may need from the Graph: its optimizers and config, and a way to add
    variables (learning rates, scaler state) the run must bind."""

    def __init__(self, graph, builder: LazyInterpreter):
        self.graph = graph
        self.config = graph.config
        self.optimizers = graph._optimizers
        self.state_names = builder.state_names
        self.namer = graph._name_optimizer_state
        self.bindings = builder.bindings  # variable op name -> eager tensor; passes add to it
        self.emit_after = emit_after  # traced ops for a pass (gradient accumulation's scaling)
