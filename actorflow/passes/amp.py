"""Automatic mixed precision: cast insertion over the whole Job (``config.enable_amp``).

Autograd already ran while tracing, so the pass sees forward, backward and optimizer ops and
gives each a precision, in Job order, from its registry record's ``amp`` class (what OneFlow
keeps as white / black / gray lists):

* ``"allow"`` ops (matmul, linear, convolutions and their input/weight gradients) run in the AMP
  dtype (float16 or bfloat16): their float32 inputs are cast to it;
* ``"deny"`` ops (losses and their gradients, softmax / log_softmax, fused attention, norms,
  reductions such as sum / mean, exp / log / pow...), every optimizer-phase op and every op that
  writes an input in place run in float32: their half-precision inputs are cast to float32;
* ``"follow"`` ops (all others) follow their inputs (the op's registered type promotion); if its
  inference rejects mixed precisions, its half-precision inputs are cast to float32.

Each op's outputs are re-inferred from its new inputs, so shapes and dtypes stay consistent down
the Job. One cast op is made per (blob, dtype) and reused by later readers (a weight is cast to
half once and read by the forward and the backward matmul); a cast takes the tags of the op it
was made for (phase, ``checkpointing``), so activation checkpointing recomputes it too; in a
distributed graph it runs on the shards, tagged with the placement and sbp of the blob it casts.
Gradients of variables (``job.train["grads"]``) come back to the variable's dtype with a cast
right after they are produced (a backward op), so accumulation and updates see float32.

Loss scaling (float16) is the optimizer emission's GradScaler
(``nn/graph/optimizer_emission.py``).
"""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.job.job import BlobDesc, Job, OpConf, split_blob, unique_name
from actorflow.job.system_ops import system_op
from actorflow.job.verify import JobError
from actorflow.ops import registry

_HALF = (dt.float16, dt.bfloat16)


def make_amp_pass(ctx):
    """The AMP pass for a graph with ``config.enable_amp()``, else None."""
    if not ctx.config.amp:
        return None
    low = ctx.config.amp_dtype

    def amp_pass(job: Job) -> Job:
        return insert_casts(job, low)

    return amp_pass


def op_precision(conf: OpConf) -> str:
    """``"allow"``, ``"deny"`` or ``"follow"`` for a registered op of the Job: its ``amp``
    class, but ``"deny"`` in the optimizer phase and for ops that write an input in place."""
    op = registry.get(conf.op_type)
    if conf.tags.get("phase") == "optimizer" or op.mutated_inputs(len(conf.inputs), conf.attrs):
        return "deny"
    return op.amp


def insert_casts(job: Job, low) -> Job:
    """``job`` with the ``"allow"`` ops in ``low`` precision (see the module docstring)."""
    low = dt.as_dtype(low)
    if low not in _HALF:
        raise ValueError(f"AMP: the low precision dtype must be float16 or bfloat16, got {low}")
    descs: dict = {}
    names = {o.name for o in job.ops}
    grads = job.train.get("grads", {})
    grad_vars: dict = {}
    for var, blob in grads.items():
        grad_vars.setdefault(blob, []).append(var)
    var_dtype = {o.name: o.outputs[0].dtype for o in job.ops_of_type("variable")}
    casts: dict = {}   # (blob, dtype) -> cast blob
    layout: dict = {}  # blob -> (placement, sbp, logical shape) of a distributed graph's blob
    fixed: dict = {}   # half gradient blob -> its float32 cast (for non-backward readers)
    out: list = []

    def cast(blob: str, to, like: OpConf) -> str:
        key = (blob, to)
        hit = casts.get(key)
        if hit is not None:
            return hit
        d = descs[blob]
        tags = {k: v for k, v in like.tags.items() if k in ("phase", "checkpointing", "stage")}
        g = layout.get(blob)
        if g is not None:  # a distributed graph's blob: the cast keeps its placement and sbp
            tags["global"] = {"placement": g[0], "in": (g[1],), "out": (g[1],),
                              "logical": (g[2],)}
        c = OpConf(unique_name(f"{split_blob(blob)[0]}-amp_cast_{to.name}", names), "cast", [blob],
                   {"dtype": to}, [BlobDesc(tuple(d.shape), to)], like.scope, tags=tags)
        out.append(c)
        descs[c.out(0)] = c.outputs[0]
        casts[key] = c.out(0)
        return c.out(0)

    for o in job.ops:
        if o.tags.get("phase") != "backward":
            o.inputs = [fixed.get(b, b) for b in o.inputs]
        row = system_op(o.op_type)
        if row is not None:
            if o.inputs:  # its output follows its input's new dtype (the system-op table)
                o.outputs = [row.output_for(o.outputs[0], descs[o.inputs[0]])]
        else:
            _retype(o, low, descs, cast)
            for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
                for d in (low, dt.float32):  # a cast made before this write would be stale
                    casts.pop((o.inputs[i], d), None)
        out.append(o)
        g = o.tags.get("global")
        for i, d in enumerate(o.outputs):
            descs[o.out(i)] = d
            if g is not None and i < len(g["out"]):
                layout[o.out(i)] = (g["placement"], g["out"][i], g["logical"][i])
            blob = o.out(i)
            want = {var_dtype.get(v) for v in grad_vars.get(blob, ())}
            want.discard(None)
            if len(want) == 1 and d.dtype not in want:
                back = dict(o.tags, phase="backward")
                back.pop("grad_root", None)
                like = o.copy(tags=back)
                fixed[blob] = cast(blob, want.pop(), like)
    job.ops = out
    job.train["grads"] = {k: fixed.get(v, v) for k, v in grads.items()}
    return job


def _retype(o: OpConf, low, descs: dict, cast) -> None:
    """Insert the casts op ``o`` needs and re-infer its outputs."""
    op = registry.get(o.op_type)
    kind = op_precision(o)
    mutated = set(op.mutated_inputs(len(o.inputs), o.attrs))
    metas = [descs[b] for b in o.inputs]
    if kind == "allow":
        o.inputs = [cast(b, low, o) if m.dtype is dt.float32 else b
                    for b, m in zip(o.inputs, metas)]
    elif kind == "deny":
        o.inputs = [cast(b, dt.float32, o) if m.dtype in _HALF and i not in mutated else b
                    for i, (b, m) in enumerate(zip(o.inputs, metas))]
    try:
        inferred = _infer(op, o, descs)
    except Exception as first:
        # mixed precisions the op doesn't take: run it in float32
        o.inputs = [cast(b, dt.float32, o) if descs[b].dtype in _HALF and i not in mutated
                    else b for i, b in enumerate(o.inputs)]
        try:
            inferred = _infer(op, o, descs)
        except Exception as e:
            raise JobError(f"AMP: op {o.name} ({o.op_type}) fails inference on inputs "
                           f"{[(tuple(descs[b].shape), descs[b].dtype.name) for b in o.inputs]}"
                           f": {e} (before the float32 fallback: {first})") from None
    o.outputs = inferred


def _infer(op, o: OpConf, descs: dict) -> list:
    from actorflow.tensor import MetaBlob, Tensor

    ins = [Tensor._from_handle(MetaBlob(b), tuple(descs[b].shape), descs[b].dtype)
           for b in o.inputs]
    return [BlobDesc(tuple(m[0]), m[1]) for m in op.infer_fn(ins, o.attrs)]
