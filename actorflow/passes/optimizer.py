"""Optimizer insertion: the update ops of the optimizers added with ``add_optimizer`` join the
Job, reading the gradients the traced backward produced (``job.train["grads"]``).

The optimizer's own ``_update`` emits the ops (the very ops eager ``step()`` runs), through a
builder appending to the Job; its state tensors and each param group's learning rate become
variables. Param groups with ``clip_grad_max_norm`` / ``clip_grad_norm_type`` get the clipping
ops (the ones ``clip_grad_norm_`` uses) before their updates.
"""
from __future__ import annotations

from actorflow.autograd.grad_mode import no_grad
from actorflow.job.builder import JobBuilder, LazyBlob
from actorflow.job.job import Job
from actorflow.tensor import Tensor

_CLIP_KEYS = ("clip_grad_max_norm", "clip_grad_norm_type")


def make_optimizer_pass(ctx):
    """The pass for the optimizers in ``ctx`` (a Graph's pass context), or None without any."""
    if not ctx.optimizers:
        return None

    def optimizer_pass(job: Job) -> Job:
        from actorflow.nn.utils.clip_grad import clip_grad_norm_

        grads = job.train.get("grads", {})
        if not ctx.optimizers or not grads:
            return job
        b = JobBuilder.over(job, ctx.bindings, namer=ctx.namer, graph_name=job.name)
        b.phase = "optimizer"
        with b, no_grad():
            for entry in ctx.optimizers:
                opt = entry.optimizer
                for j, group in enumerate(opt.param_groups):
                    pairs = []
                    for p in group["params"]:
                        name = ctx.state_names.get(id(p), (None,))[0]
                        if name is not None and name in grads:
                            pairs.append((p, b.tensor(grads[name])))
                    if not pairs:
                        continue
                    if all(k in group for k in _CLIP_KEYS):
                        holders = []
                        for p, g in pairs:
                            h = Tensor._from_handle(LazyBlob(b, "<param>"), tuple(p._shape),
                                                    p.dtype)
                            h._grad = g
                            holders.append(h)
                        clip_grad_norm_(holders, group["clip_grad_max_norm"],
                                        group["clip_grad_norm_type"])
                        pairs = [(p, h._grad) for (p, _), h in zip(pairs, holders)]
                    lr = entry.lr_tensors[j]
                    attrs = opt._attrs(group)
                    for p, g in pairs:
                        opt._update(p, g, lr, attrs, group)
        for name, t in b.bindings.items():
            ctx.bindings.setdefault(name, t)
        return b.job

    return optimizer_pass
