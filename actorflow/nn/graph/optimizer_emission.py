"""Optimizer emission: the update ops of the optimizers added with ``add_optimizer`` join the
Job, reading the gradients the traced backward produced (``job.train["grads"]``). It is the
``optimizer`` step of the pass list (``actorflow.passes.PASSES``), the one step that traces: so
it lives here, above ``optim``, and ``nn.Graph`` hands it to ``build_pipeline``.

The optimizer's own ``_update`` emits the ops (the very ops eager ``step()`` runs), through a
builder appending to the Job; its state tensors and each param group's learning rate become
variables. Param groups with ``clip_grad_max_norm`` / ``clip_grad_norm_type`` get the clipping
ops (the ones ``clip_grad_norm_`` uses) before their updates; the ``fuse_clip_grad`` pass later
folds each ``clip_grad_by_norm`` nothing else observes into the update reading its gradient.

With float16 AMP (``config.enable_amp(dtype=flow.float16)``, AMP pass on) a dynamic GradScaler
works as PyTorch's ``GradScaler`` with its defaults: the seed gradient of ``backward()`` is
multiplied by ``scale``; each optimizer's gradients are unscaled (``g * (1 / scale)``) before
clipping and the update; if any of them is not finite, that optimizer's update ops do nothing
(their ``skip_if`` flag); then ``scale`` is multiplied by ``backoff_factor`` (a non-finite step)
or by ``growth_factor`` after ``growth_interval`` finite steps in a row. ``scale`` and
``growth_tracker`` are variables (``_grad_scaler.scale``, ``_grad_scaler.growth_tracker``) bound
to tensors the Graph keeps, so they persist across calls and recompiles and are in
``graph.state_dict()["_grad_scaler"]``.

After the updates the pass adds one to the graph's training step (``train_step``), unless the
scaler skipped the step.
"""
from __future__ import annotations

import numpy as np

from actorflow.autograd.grad_mode import no_grad
from actorflow.framework import dtype as dt
from actorflow.dispatch.lazy import LazyBlob, LazyInterpreter
from actorflow.job.job import Job
from actorflow.nn.graph import train_step
from actorflow.nn.graph.emission import emit_after
from actorflow.nn.graph.zero_updates import zero_updates
from actorflow.passes.grad_acc import rewire_readers
from actorflow.tensor import Tensor

_CLIP_KEYS = ("clip_grad_max_norm", "clip_grad_norm_type")


class GradScalerState:
    """The loss scale of a float16 AMP graph (PyTorch GradScaler defaults). Dynamic: a step
    whose unscaled gradients are not all finite updates nothing and backs the scale off, and
    ``growth_interval`` finite steps in a row grow it. ``dynamic=False`` (OneFlow's
    ``StaticGradScaler``): the scale stays ``init_scale``, gradients are unscaled, no step
    is skipped."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 dynamic: bool = True):
        if not init_scale > 0:
            raise ValueError(f"GradScaler: the scale must be > 0, got {init_scale}")
        if not (growth_factor > 1.0 and 0.0 < backoff_factor < 1.0 and growth_interval >= 1):
            raise ValueError("GradScaler: need growth_factor > 1, 0 < backoff_factor < 1 and "
                             "growth_interval >= 1")
        self.dynamic = bool(dynamic)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.scale = Tensor._wrap(np.array(init_scale, np.float32), dt.float32)
        self.growth_tracker = Tensor._wrap(np.zeros((), np.int64), dt.int64)

    def get_scale(self) -> float:
        return float(self.scale._array())

    def state_dict(self) -> dict:
        return {"scale": self.get_scale(), "growth_tracker": int(self.growth_tracker._array()),
                "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "dynamic": self.dynamic}

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict()``'s values (in place: compiled graphs keep their bindings)."""
        self.scale._array_for_write()[...] = float(state["scale"])
        self.growth_tracker._array_for_write()[...] = int(state["growth_tracker"])
        self.growth_factor = float(state.get("growth_factor", self.growth_factor))
        self.backoff_factor = float(state.get("backoff_factor", self.backoff_factor))
        self.growth_interval = int(state.get("growth_interval", self.growth_interval))
        self.dynamic = bool(state.get("dynamic", self.dynamic))

    def names(self) -> dict:
        return {id(self.scale): "_grad_scaler.scale",
                id(self.growth_tracker): "_grad_scaler.growth_tracker"}


def grad_scaler(graph, create: bool = False):
    """The GradScalerState of ``graph`` (made on first use when ``create``), or None."""
    s = graph.__dict__.get("_grad_scaler")
    if s is None and create:
        s = GradScalerState()
        graph.__dict__["_grad_scaler"] = s
    return s


def uses_grad_scaler(config) -> bool:
    """Whether a graph with ``config`` scales its loss (float16 AMP with the AMP pass on)."""
    return bool(config.amp and config.amp_dtype is dt.float16 and config.pass_enabled("amp"))


def make_optimizer_pass(ctx):
    """The pass for the optimizers in ``ctx`` (a Graph's pass context), or None without any."""
    if not ctx.optimizers:
        return None
    scaler = None
    owner = getattr(ctx, "graph", None) or ctx
    if uses_grad_scaler(ctx.config):
        scaler = grad_scaler(owner, create=True)
    step = train_step.train_step(owner)

    def optimizer_pass(job: Job) -> Job:
        grads = job.train.get("grads", {})
        if not ctx.optimizers or not grads:
            return job
        namer = train_step.namer(step, ctx.namer)
        if scaler is not None:
            namer = _scaler_namer(scaler, namer)
            _scale_seeds(job, scaler, ctx.bindings, namer)
        b = LazyInterpreter.over(job, ctx.bindings, namer=namer, graph_name=job.name)
        b.phase = "optimizer"
        with b, no_grad():
            found_any, start = None, len(b.job.ops)
            for entry in ctx.optimizers:
                with _zero(b, entry.optimizer, ctx.config):
                    found = _emit_updates(b, entry, grads, ctx.state_names, scaler)
                if found is not None:
                    found_any = found if found_any is None else found_any.logical_or(found)
            updates = b.job.ops[start:]
            if updates:  # (a skipped step, found_any true, does not count: OneFlow's rule)
                train_step.emit_increment(b, step, updates, found_any)
            if found_any is not None:
                _emit_scaler_update(b, scaler, found_any)
        for name, t in b.bindings.items():
            ctx.bindings.setdefault(name, t)
        # the namer's closure holds the graph's (weak) namer strongly, and the trace's lazy
        # tensors keep ``b`` alive in a cycle: drop it so a deleted graph is freed at once
        b.namer = None
        return b.job

    return optimizer_pass


def _zero(b: LazyInterpreter, opt, config):
    """ZeRO's rerouting of ``opt``'s updates when ``config.enable_zero`` is on (and the trace
    is distributed); a no-op context otherwise."""
    import contextlib

    stage = getattr(config, "zero_stage", 0)
    if not stage or not getattr(b, "_global", False):
        return contextlib.nullcontext()
    return zero_updates(b, opt, stage, config.zero_shard_min_size)


def _scaler_namer(scaler: GradScalerState, fallback):
    names = scaler.names()

    def namer(t):
        name = names.get(id(t))
        if name is not None:
            return name, "grad_scaler"
        return fallback(t) if fallback is not None else None

    return namer


def _scale_seeds(job: Job, scaler: GradScalerState, bindings: dict, namer) -> None:
    """Multiply the seed gradient of each ``backward()`` by the loss scale."""
    for seed in [o for o in job.ops if o.tags.get("grad_root")]:
        for i in range(len(seed.outputs)):
            blob = seed.out(i)

            def scaled(b, blob=blob):
                return b.tensor(blob) * b.variable(scaler.scale)

            new, added = emit_after(job, seed.name, bindings, "backward", scaled, namer=namer)
            rewire_readers(job, blob, new, skip=added)


def _emit_updates(b: LazyInterpreter, entry, grads: dict, state_names: dict, scaler):
    """The clipping and update ops of one optimizer; with a scaler, returns its found-inf flag
    (a lazy bool) after unscaling its gradients and gating its updates on it."""
    from actorflow.functional import isfinite
    from actorflow.optim.clip_grad import clip_grad_norm_

    opt = entry.optimizer
    groups = []
    for j, group in enumerate(opt.param_groups):
        pairs = []
        for p in group["params"]:
            name = state_names.get(id(p), (None,))[0]
            if name is not None and name in grads:
                pairs.append((p, b.tensor(grads[name])))
        if pairs:
            groups.append((j, group, pairs))
    if not groups:
        return None
    found = None
    if scaler is not None:
        inv = b.variable(scaler.scale).reciprocal()
        finite = None
        unscaled_groups = []
        for j, group, pairs in groups:
            pairs = [(p, g * inv) for p, g in pairs]
            for _, g in pairs if scaler.dynamic else ():
                ok = isfinite(g).all()
                finite = ok if finite is None else finite.logical_and(ok)
            unscaled_groups.append((j, group, pairs))
        groups = unscaled_groups
        if scaler.dynamic:
            found = finite.logical_not()
    for j, group, pairs in groups:
        if all(k in group for k in _CLIP_KEYS):
            holders = []
            for p, g in pairs:
                h = Tensor._from_handle(LazyBlob(b, "<param>"), tuple(p._shape), p.dtype)
                h._grad = g
                holders.append(h)
            clip_grad_norm_(holders, group["clip_grad_max_norm"],
                            group["clip_grad_norm_type"])
            pairs = [(p, h._grad) for (p, _), h in zip(pairs, holders)]
        lr = entry.lr_tensors[j]
        attrs = opt._attrs(group)
        for p, g in pairs:
            start = len(b.job.ops)
            opt._update(p, g, lr, attrs, group)
            if found is not None:
                _gate(b, b.job.ops[start:], found._h.name)
    return found


def _gate(b: LazyInterpreter, new_ops: list, flag: str) -> None:
    """Make the update ops in ``new_ops`` (registry trait ``optimizer_update``; they take
    ``skip_if``) skip when blob ``flag`` is true."""
    from actorflow.job.job import split_blob
    from actorflow.ops import registry

    variables = {o.name for o in b.job.ops_of_type("variable")}
    for o in new_ops:
        if o.op_type == "variable":
            continue
        op = registry.get(o.op_type)
        writes_state = any(split_blob(o.inputs[i])[0] in variables
                           for i in op.mutated_inputs(len(o.inputs), o.attrs))
        if not writes_state or o.tags.get("zero_write_back"):
            continue  # (ZeRO's write-back of a gathered shard: unchanged when its update skips)
        if not op.optimizer_update:
            raise RuntimeError(f"nn.Graph GradScaler: optimizer op {o.name} ({o.op_type}) writes "
                               f"state but can't be skipped on a non-finite step; only the "
                               f"registered update ops take skip_if")
        o.inputs.append(flag)
        o.attrs["skip_if"] = True
        b.builder.add_reader(flag, o.name)


def _emit_scaler_update(b: LazyInterpreter, scaler: GradScalerState, found) -> None:
    """scale and growth_tracker after this step (PyTorch's dynamic update rule)."""
    from actorflow.functional import isfinite, where

    scale = b.variable(scaler.scale)
    tracker = b.variable(scaler.growth_tracker)
    succ = tracker + 1
    grow = succ >= scaler.growth_interval
    grown = scale * scaler.growth_factor
    grow_ok = grow.logical_and(isfinite(grown))
    new_scale = where(found, scale * scaler.backoff_factor, where(grow_ok, grown, scale))
    new_tracker = where(found, 0, where(grow, 0, succ))
    scaler.scale.copy_(new_scale)
    scaler.growth_tracker.copy_(new_tracker)
