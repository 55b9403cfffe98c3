"""Gradient accumulation: one graph call runs ``n`` micro-batches and one update.

OneFlow's semantics, which this pass follows:

* While tracing (``actorflow.nn.graph.micro_batch``, when
  ``config.set_gradient_accumulation_steps(n)`` is set on a training graph), every input op
  takes the whole batch and is followed by an ``unpack`` op; ``build`` sees the micro-batch
  (dim 0 divided by ``n``), so shapes computed in ``build`` (``flow.ones(out.shape)``) are
  micro-batch shapes.
* The pass tags every op with its ``stage`` (``actorflow.job.schedule.stage_of``): ``pre``
  (inputs, variables, literals: once per call), ``micro`` (forward and backward: ``n`` times)
  and ``post`` (optimizer ops and output ops: once, after the micro steps). A variable read
  by a micro op is read through a ``repeat`` op;
  a micro blob read by a post op goes through ``acc`` (summed over the micro steps; gradients)
  or, for output ops, ``pack`` (concatenated along dim 0; a scalar such as a loss comes back
  as the ``n`` values, shape ``(n,)``, as OneFlow returns it).
* The seed gradient of each ``backward()`` is multiplied by ``1 / n``, so the accumulated
  gradient is the mean over micro-batches: the same as an eager loop that calls
  ``(loss / n).backward()`` per micro-batch and steps once (OneFlow scales the loss by the
  number of accumulation steps the same way; the returned losses are not scaled).
"""
from __future__ import annotations

from actorflow.job.job import BlobDesc, Job, OpConf, split_blob, unique_name
from actorflow.job.schedule import stage_of

class GradientAccumulationError(ValueError):
    """The Job can't be split into micro-batches (the message says which input or op)."""


def make_grad_acc_pass(ctx):
    """The pass for a training graph with more than one accumulation step, else None."""
    n = int(ctx.config.accumulation_steps)
    if n <= 1 or not ctx.config.training:
        return None

    def gradient_accumulation_pass(job: Job) -> Job:
        return accumulate_gradients(job, n, ctx.bindings, ctx.emit_after)

    return gradient_accumulation_pass


def accumulate_gradients(job: Job, n: int, bindings: dict, emit_after) -> Job:
    """``job`` (traced with ``nn.graph.micro_batch.add_micro_batch_input``) as an
    ``n``-step accumulation Job. ``emit_after(job, anchor, bindings, phase, fn)`` adds the ops
    of the seed gradients' ``1 / n`` scaling (``nn.graph.emission.emit_after``: they are traced
    functional calls, which a pass does not make itself)."""
    if any(o.op_type == "input" for o in job.ops) and not job.ops_of_type("micro_unpack"):
        raise GradientAccumulationError(
            f"job {job.name}: gradient accumulation needs the inputs traced as micro-batches "
            f"(unpack ops), but the Job has none; trace it with add_micro_batch_input")
    _scale_seeds(job, 1.0 / n, bindings, emit_after)
    for o in job.ops:   # another stage's per-micro-batch result: packed there
        if o.op_type == "output" and o.tags.get("absent") == "activation":
            _pack_global_tag(o, n)
    stage = stage_of(job)
    producer = {o.name: o for o in job.ops}
    ops: list = []
    repeat_of: dict = {}   # pre blob -> repeat blob
    acc_of: dict = {}      # micro blob -> acc blob
    pack_of: dict = {}     # micro blob -> pack blob
    extra_after: dict = {}  # micro op name -> acc/pack ops to place right after it
    names = {o.name for o in job.ops}

    for o in job.ops:
        st = stage[o.name]
        if st == "micro":
            for i, b in enumerate(o.inputs):
                src = producer[split_blob(b)[0]]
                if stage[src.name] == "pre" and o.op_type != "micro_unpack":
                    if b not in repeat_of:
                        r = OpConf(unique_name(f"{src.name}-repeat", names),
                                   "micro_repeat", [b], {"n": n},
                                   [src.outputs[split_blob(b)[1]]], scope=o.scope,
                                   tags={"phase": o.tags.get("phase", "forward"),
                                         "stage": "micro"})
                        ops.append(r)
                        repeat_of[b] = r.out(0)
                    o.inputs[i] = repeat_of[b]
                elif stage[src.name] == "post":
                    raise GradientAccumulationError(
                        f"job {job.name}: op {o.name} ({o.op_type}) runs once per micro-batch "
                        f"but reads {b}, which is only computed after the micro-batches")
        elif st == "post":
            for i, b in enumerate(o.inputs):
                src = producer[split_blob(b)[0]]
                if stage[src.name] != "micro":
                    continue
                desc = src.outputs[split_blob(b)[1]]
                if o.op_type == "output":
                    packed = BlobDesc(_packed_shape(desc, n), desc.dtype)
                    if b not in pack_of:
                        p = OpConf(unique_name(f"{src.name}-pack", names),
                                   "micro_pack", [b], {"n": n},
                                   [packed], scope=src.scope,
                                   tags={"phase": "output", "stage": "micro"})
                        extra_after.setdefault(src.name, []).append(p)
                        pack_of[b] = p.out(0)
                    o.inputs[i] = pack_of[b]
                    _pack_global_tag(o, n)
                    o.outputs = [packed]
                else:
                    if not desc.dtype.is_floating_point:
                        raise GradientAccumulationError(
                            f"job {job.name}: op {o.name} ({o.op_type}) runs after the "
                            f"micro-batches and reads {b} ({desc.dtype}), a per-micro-batch "
                            f"value that can only be accumulated if it is floating point")
                    if b not in acc_of:
                        a = OpConf(unique_name(f"{src.name}-acc", names),
                                   "micro_acc", [b], {"n": n}, [desc],
                                   scope=src.scope, tags={"phase": "backward", "stage": "micro"})
                        extra_after.setdefault(src.name, []).append(a)
                        acc_of[b] = a.out(0)
                    o.inputs[i] = acc_of[b]
        o.tags["stage"] = st
        ops.append(o)
    out: list = []
    for o in ops:
        out.append(o)
        out.extend(extra_after.get(o.name, ()))
    job.ops = out
    grads = job.train.get("grads", {})
    job.train["grads"] = {k: acc_of.get(v, v) for k, v in grads.items()}
    job.train["accumulation_steps"] = n
    return job


def _packed_shape(desc: BlobDesc, n: int) -> tuple:
    return (desc.shape[0] * n,) + tuple(desc.shape[1:]) if desc.shape else (n,)


def _pack_global_tag(out, n: int) -> None:
    """A packed global output's logical shape: the micro-batch results of each rank
    concatenated on dim 0 (a split(0) output: the whole batch in its order again)."""
    g = out.tags.get("global")
    if g is None:
        return
    shape = tuple(g["logical"][0])
    packed = [shape[0] * n, *shape[1:]] if shape else [n]
    out.tags = dict(out.tags, **{"global": dict(g, logical=[packed, *g["logical"][1:]])})


def _scale_seeds(job: Job, factor: float, bindings: dict, emit_after) -> None:
    """Multiply the seed gradient of every ``backward()`` (ops tagged ``grad_root``) by
    ``factor``: its readers read the scaled blob instead."""
    seeds = [o for o in job.ops if o.tags.get("grad_root")]
    for seed in seeds:
        for i in range(len(seed.outputs)):
            blob = seed.out(i)
            scaled, added = emit_after(job, seed.name, bindings, "backward",
                                       lambda b, blob=blob: b.tensor(blob) * factor)
            rewire_readers(job, blob, scaled, skip=added)


def rewire_readers(job: Job, old: str, new: str, skip=(), only=None) -> None:
    """Readers of blob ``old`` read ``new`` instead (except ops named in ``skip``; if ``only``
    is given, just the ops it accepts)."""
    for o in job.ops:
        if o.name in skip or (only is not None and not only(o)):
            continue
        if old in o.inputs:
            o.inputs = [new if b == old else b for b in o.inputs]
