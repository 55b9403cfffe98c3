"""The reference executor: runs a Job op by op through the registered kernels.

It is the simple, obviously-correct way to run a graph (``ACTORFLOW_RUN_GRAPH_BY_VM=1``) and the
oracle the actor runtime is tested against. The Job is compiled once into a list of steps over a
table of blob slots; every run allocates each op's outputs, calls the op's kernel (the same
function eager mode calls) and returns the arrays of the output ops.

Gradient accumulation (``job.train["accumulation_steps"] = n``) gives every op a ``stage`` tag:
``pre`` ops run once before the micro-batches, ``micro`` ops run n times, ``post`` ops run once
after. Four system ops carry values across the stages: ``micro_unpack`` (micro step i reads
piece i of a ``pre`` blob split along dim 0), ``micro_repeat`` (a ``pre`` blob read by every
micro step), ``micro_acc`` (sums a blob over the micro steps) and ``micro_pack`` (concatenates a
blob's micro-step values along dim 0; a scalar's n values are stacked into shape ``(n,)``).

An op without a ``stage`` tag (one a later pass added) gets one from its inputs (``stage_of``):
``post`` if it reads a ``micro_acc``/``micro_pack`` result or a ``post`` blob, or is an optimizer
or output op; ``pre`` for inputs, variables and literals; ``micro`` otherwise.

Random ops whose ``seed`` attr is None get a seed from the global generator on every run, drawn
in Job order at the start of each stage run: once for ``pre``, once per micro step, once for
``post`` - the order an eager loop over the micro-batches draws them. An op tagged ``seed_of``
(an activation-checkpointing recomputation) reuses the seed its original drew in the same step.
"""
from __future__ import annotations

import numpy as np

from actorflow.job.job import Job, split_blob
from actorflow.ops import registry
from actorflow.random import default_generator
from actorflow.tensor import unsynced_array


class ExecutionError(RuntimeError):
    """A kernel failed while a graph ran; the message names the op and its module."""


class _Step:
    __slots__ = ("conf", "kind", "kernel", "ins", "outs", "descs", "attrs", "random", "stage")


class ReferenceExecutor:
    """Runs ``job`` with ``run(inputs, bindings)``; see the module docstring."""

    def __init__(self, job: Job):
        self.job = job
        self.n_micro = int(job.train.get("accumulation_steps", 1))
        order = job.topological_order()
        slot_of: dict = {}
        for conf in order:
            for i in range(len(conf.outputs)):
                slot_of[conf.out(i)] = len(slot_of)
        self.n_slots = len(slot_of)
        stages = stage_of(job) if self.n_micro > 1 else {}
        self.steps: list = []
        self.input_steps: list = []
        self.output_slots: list = []
        for conf in order:
            s = _Step()
            s.conf = conf
            s.kind = conf.op_type
            s.ins = [slot_of[b] for b in conf.inputs]
            s.outs = [slot_of[conf.out(i)] for i in range(len(conf.outputs))]
            s.descs = conf.outputs
            s.attrs = conf.attrs
            s.stage = stages[conf.name] if self.n_micro > 1 else "micro"
            s.kernel = None
            s.random = False
            if conf.op_type == "input":
                self.input_steps.append(s)
            elif conf.op_type == "output":
                self.output_slots.append((conf.attrs["index"], s.ins[0]))
            elif conf.op_type not in _SYSTEM:
                op = registry.get(conf.op_type)
                s.kernel = op.kernel_cpu
                s.random = op.random and conf.attrs.get("seed") is None
            self.steps.append(s)
        self.output_slots.sort()
        self.stages = {st: [s for s in self.steps if s.stage == st]
                       for st in ("pre", "micro", "post")}
        # seeds are drawn per stage run in Job order (the trace order, the order eager mode
        # draws them); a recomputed op (seed_of) reuses its original's seed
        by_name = {s.conf.name: s for s in self.steps}
        self._owners: dict = {st: [] for st in self.stages}  # stage -> steps that draw a seed
        owner_index: dict = {}
        for conf in job.ops:
            s = by_name[conf.name]
            if s.random and conf.tags.get("seed_of") is None:
                owner_index[conf.name] = len(self._owners[s.stage])
                self._owners[s.stage].append(s)
        self._seed_src = {}
        for s in self.steps:
            if s.random:
                src = s.conf.tags.get("seed_of", s.conf.name)
                if src not in owner_index or by_name[src].stage != s.stage:
                    raise ExecutionError(f"{s.conf.op_type} (op {s.conf.name}): tagged seed_of "
                                         f"{src!r}, which is not a random op of the same stage "
                                         f"drawing its own seed")
                self._seed_src[s.conf.name] = owner_index[src]

    def run(self, inputs: list, bindings: dict, seeds: dict | None = None) -> list:
        """Run one iteration. ``inputs``: arrays in input-index order; ``bindings``: variable
        name -> eager Tensor (read live, written in place by update ops); ``seeds``: the random
        ops' seeds drawn beforehand (op name -> one per micro-batch, or one), as
        ``actorflow.runtime.launcher.draw_seeds`` draws them; by default drawn here. Returns the
        output arrays in output-index order."""
        slots: list = [None] * self.n_slots
        for s in self.input_steps:
            slots[s.outs[0]] = inputs[s.conf.attrs["index"]]
        n = self.n_micro
        ctx = _RunContext(slots, bindings, [], self._seed_src, n)
        ctx.given = seeds
        self._run_stage("pre", ctx)
        for i in range(n):
            ctx.micro = i
            self._run_stage("micro", ctx)
        self._run_stage("post", ctx)
        return [slots[i] for _, i in self.output_slots]

    def _run_stage(self, stage: str, ctx: "_RunContext") -> None:
        given = ctx.given
        if given is None:
            ctx.seeds = [default_generator.next_seed() for _ in self._owners[stage]]
        else:
            k = ctx.micro if stage == "micro" else 0
            ctx.seeds = [given[s.conf.name][k] for s in self._owners[stage]]
        self._run_steps(self.stages[stage], ctx)

    def _run_steps(self, steps: list, ctx: "_RunContext") -> None:
        slots = ctx.slots
        for s in steps:
            if s.kernel is None:
                _SYSTEM[s.kind](s, ctx)
                continue
            outs = [np.empty(d.shape, d.dtype.np) for d in s.descs]
            attrs = s.attrs
            if s.random:
                attrs = dict(attrs, seed=ctx.seeds[ctx.seed_src[s.conf.name]])
            try:
                s.kernel([slots[i] for i in s.ins], outs, attrs)
            except Exception as e:
                conf = s.conf
                where = f" [in module {conf.scope}]" if conf.scope else ""
                shapes = ", ".join(str(tuple(slots[i].shape)) for i in s.ins)
                raise ExecutionError(f"{conf.op_type} (op {conf.name}){where}: kernel failed "
                                     f"(input shapes: {shapes}): {type(e).__name__}: {e}") from e
            for i, o in zip(s.outs, outs):
                slots[i] = o


class _RunContext:
    __slots__ = ("slots", "bindings", "seeds", "seed_src", "n", "micro", "acc", "given")

    def __init__(self, slots, bindings, seeds, seed_src, n):
        self.slots, self.bindings, self.seeds, self.seed_src = slots, bindings, seeds, seed_src
        self.n, self.micro, self.acc = n, 0, {}


def _input(s, ctx):
    pass  # filled before the steps run


def _variable(s, ctx):
    t = ctx.bindings.get(s.conf.attrs["name"])
    if t is None:
        raise ExecutionError(f"variable {s.conf.attrs['name']!r} has no tensor bound to it")
    ctx.slots[s.outs[0]] = unsynced_array(t)  # the graph call's VM instruction is ordered


def _literal(s, ctx):
    ctx.slots[s.outs[0]] = s.attrs["value"]


def _output(s, ctx):
    pass  # read after the run


def _unpack(s, ctx):
    whole = ctx.slots[s.ins[0]]
    k = whole.shape[0] // ctx.n
    ctx.slots[s.outs[0]] = whole[ctx.micro * k:(ctx.micro + 1) * k]


def _repeat(s, ctx):
    ctx.slots[s.outs[0]] = ctx.slots[s.ins[0]]


def _acc(s, ctx):
    v = ctx.slots[s.ins[0]]
    if ctx.micro == 0:
        total = np.array(v, dtype=s.descs[0].dtype.np, copy=True)
        ctx.acc[s.conf.name] = total
        ctx.slots[s.outs[0]] = total
    else:
        ctx.acc[s.conf.name] += v


def _pack(s, ctx):
    v = ctx.slots[s.ins[0]]
    if ctx.micro == 0:
        d = s.descs[0]
        ctx.acc[s.conf.name] = np.empty(d.shape, d.dtype.np)
        ctx.slots[s.outs[0]] = ctx.acc[s.conf.name]
    k = v.shape[0] if v.ndim else 1
    ctx.acc[s.conf.name][ctx.micro * k:(ctx.micro + 1) * k] = v


_SYSTEM = {"input": _input, "variable": _variable, "literal": _literal, "output": _output,
           "micro_unpack": _unpack, "micro_repeat": _repeat, "micro_acc": _acc,
           "micro_pack": _pack}


def stage_of(job: Job) -> dict:
    """op name -> ``pre`` / ``micro`` / ``post`` for a gradient-accumulation Job: the op's
    ``stage`` tag, or for an untagged op (added by a later pass) the stage its inputs imply
    (see the module docstring)."""
    stages: dict = {}
    accumulated = {o.name for o in job.ops if o.op_type in ("micro_acc", "micro_pack")}
    for conf in job.ops:
        st = conf.tags.get("stage")
        if st is None:
            if conf.op_type in ("input", "variable", "literal"):
                st = "pre"
            elif conf.op_type == "output" or conf.tags.get("phase") == "optimizer":
                st = "post"
            else:
                st = "micro"
                for b in conf.inputs:
                    src = split_blob(b)[0]
                    if stages.get(src) == "post" or src in accumulated:
                        st = "post"
                        break
        elif st not in ("pre", "micro", "post"):
            raise ExecutionError(f"op {conf.name}: unknown stage {st!r} (pre, micro or post)")
        stages[conf.name] = st
    return stages


def blob_slot_names(job: Job) -> list:
    """Blob names in slot order (for debugging)."""
    return [f"{o.name}/{i}" for o in job.topological_order() for i in range(len(o.outputs))]


__all__ = ["ReferenceExecutor", "ExecutionError", "blob_slot_names", "split_blob",
           "stage_of"]
