"""The reference executor: runs a Job op by op through the registered kernels.

It is the simple, obviously-correct way to run a graph (``ACTORFLOW_RUN_GRAPH_BY_VM=1``) and the
oracle the actor runtime is tested against. The Job is compiled once into a list of steps over a
table of blob slots; every run allocates each op's outputs, calls the op's kernel (the same
function eager mode calls) and returns the arrays of the output ops.

Gradient accumulation (``job.train["accumulation_steps"] = n``) gives every op a ``stage`` tag:
``pre`` ops run once before the micro-batches, ``micro`` ops run n times, ``post`` ops run once
after. Four system ops carry values across the stages: ``unpack`` (micro step i reads piece i of
a ``pre`` blob split along dim 0), ``repeat`` (a ``pre`` blob read by every micro step),
``acc`` (sums a blob over the micro steps) and ``pack`` (concatenates a blob's micro-step values
along dim 0).
"""
from __future__ import annotations

import numpy as np

from actorflow.job.job import Job, split_blob
from actorflow.ops import registry
from actorflow.random import default_generator


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
            s.stage = conf.tags.get("stage", "micro") if self.n_micro > 1 else "micro"
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
        # seeds are drawn in trace order, the order eager mode would draw them
        seed_owner = {}
        self._random_steps = []
        by_name = {s.conf.name: s for s in self.steps}
        for conf in job.ops:
            s = by_name[conf.name]
            if s.random:
                src = conf.tags.get("seed_of")  # a recomputed op reuses its original's seed
                if src is None:
                    seed_owner[conf.name] = len(self._random_steps)
                    self._random_steps.append(s)
        self._seed_src = {}
        for s in self.steps:
            if s.random:
                src = s.conf.tags.get("seed_of", s.conf.name)
                self._seed_src[s.conf.name] = seed_owner[src]
        self.stages = {st: [s for s in self.steps if s.stage == st]
                       for st in ("pre", "micro", "post")}

    def run(self, inputs: list, bindings: dict) -> list:
        """Run one iteration. ``inputs``: arrays in input-index order; ``bindings``: variable
        name -> eager Tensor (read live, written in place by update ops). Returns the output
        arrays in output-index order."""
        slots: list = [None] * self.n_slots
        for s in self.input_steps:
            slots[s.outs[0]] = inputs[s.conf.attrs["index"]]
        seeds = [default_generator.next_seed() for _ in self._random_steps]
        n = self.n_micro
        ctx = _RunContext(slots, bindings, seeds, self._seed_src, n)
        self._run_steps(self.stages["pre"], ctx)
        for i in range(n):
            ctx.micro = i
            self._run_steps(self.stages["micro"], ctx)
        self._run_steps(self.stages["post"], ctx)
        return [slots[i] for _, i in self.output_slots]

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
    __slots__ = ("slots", "bindings", "seeds", "seed_src", "n", "micro", "acc")

    def __init__(self, slots, bindings, seeds, seed_src, n):
        self.slots, self.bindings, self.seeds, self.seed_src = slots, bindings, seeds, seed_src
        self.n, self.micro, self.acc = n, 0, {}


def _input(s, ctx):
    pass  # filled before the steps run


def _variable(s, ctx):
    t = ctx.bindings.get(s.conf.attrs["name"])
    if t is None:
        raise ExecutionError(f"variable {s.conf.attrs['name']!r} has no tensor bound to it")
    ctx.slots[s.outs[0]] = t._array()


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
           "unpack": _unpack, "repeat": _repeat, "acc": _acc, "pack": _pack}


def blob_slot_names(job: Job) -> list:
    """Blob names in slot order (for debugging)."""
    return [f"{o.name}/{i}" for o in job.topological_order() for i in range(len(o.outputs))]


__all__ = ["ReferenceExecutor", "ExecutionError", "blob_slot_names", "split_blob"]
