"""How a compiled graph runs: the executor protocol, its Future, and the reference executor.

Every executor (this module's ``ReferenceExecutor`` and the actor runtime's
``actorflow.runtime.RuntimeExecutor``) implements ``Executor``:

* ``launch(inputs, bindings, overrides=None, seeds=None) -> Future``: start one call on
  ``inputs`` (arrays in input-index order) with ``bindings`` (variable name -> eager tensor,
  read live and written in place by update ops), ``overrides`` (variable name -> array used for
  this call only: learning rates snapshotted when the call was made) and ``seeds`` (from
  ``actorflow.job.schedule.draw_seeds``; drawn now if None). The Future gives output arrays
  the caller owns (never views of state or inputs), or the error the call failed with;
* ``run(...)``: ``launch(...).result()``;
* ``plan``: the Plan it runs, or None when it runs the Job itself;
* ``close()``: release threads and memory (a later ``launch`` starts afresh).

The reference executor is the simple, obviously-correct way to run a graph
(``ACTORFLOW_RUN_GRAPH_BY_VM=1``) and the oracle the actor runtime is tested against: it
compiles the Job once into a list of steps over a table of blob slots; every call allocates
each op's outputs and calls the op's kernel (the same function eager mode calls), running the
stages of ``actorflow.job.schedule`` (pre, n micro steps, post). It finishes a call before
``launch`` returns.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from actorflow.errors import RemoteRankError, kernel_failure
from actorflow.job.job import Job
from actorflow.job.schedule import STAGES, accumulation_steps, draw_seeds, seed_draw_order, \
    stage_of
from actorflow.job.system_ops import system_op
from actorflow.ops import registry

_DEFAULT_WAIT = float(os.environ.get("ACTORFLOW_GRAPH_TIMEOUT", "600"))


class Future:
    """The outcome of one graph call: output arrays, or the error that stopped it.
    ``wrote_state`` turns True once a kernel that writes its inputs in place (an update op)
    has started for the call: a failed call with it False left the state untouched."""

    __slots__ = ("_event", "_value", "_error", "piece", "_callbacks", "_lock", "wrote_state")

    def __init__(self, piece: int):
        self._event = threading.Event()
        self._value = None
        self._error = None
        self.piece = piece
        self._callbacks: list = []
        self._lock = threading.Lock()
        self.wrote_state = False

    def set_result(self, value) -> None:
        self._value = value
        self._finish()

    def set_error(self, error: BaseException) -> None:
        if not self._event.is_set():
            self._error = error
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def add_done_callback(self, fn) -> None:
        """Call ``fn(future)`` when the call finishes (at once if it has); it runs on the thread
        that completes the future (the sink's actor thread) and must be quick."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def exception(self):
        """The error the call failed with, or None (once done)."""
        return self._error

    def done(self) -> bool:
        return self._event.is_set()

    def result(self, timeout: float | None = None):
        """Wait for the call to finish; raise its error if it failed."""
        if not self._event.wait(_DEFAULT_WAIT if timeout is None else timeout):
            raise TimeoutError(f"graph call {self.piece} did not finish in time")
        if self._error is not None:
            raise self._error
        return self._value


class Executor:
    """The protocol every graph executor implements (see the module docstring)."""

    plan = None

    def launch(self, inputs: list, bindings: dict, overrides: dict | None = None,
               seeds: dict | None = None) -> Future:
        raise NotImplementedError

    def run(self, inputs: list, bindings: dict, overrides: dict | None = None,
            seeds: dict | None = None) -> list:
        """One call, waiting for its outputs (errors name the failing op)."""
        return self.launch(inputs, bindings, overrides, seeds).result()

    def close(self) -> None:
        """Release what the executor holds; the default holds nothing."""


class _Step:
    __slots__ = ("conf", "kind", "kernel", "ins", "outs", "descs", "attrs", "random",
                 "seed_key", "stage", "system", "writes_inputs")


class ReferenceExecutor(Executor):
    """Runs ``job`` op by op (see the module docstring)."""

    def __init__(self, job: Job):
        self.job = job
        self.n_micro = accumulation_steps(job)
        self._order = seed_draw_order(job)
        self._calls = 0
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
        self.aliased_outputs = _outputs_aliasing_memory(job)
        for conf in order:
            s = _Step()
            s.conf = conf
            s.kind = conf.op_type
            s.ins = [slot_of[b] for b in conf.inputs]
            s.outs = [slot_of[conf.out(i)] for i in range(len(conf.outputs))]
            s.descs = conf.outputs
            s.attrs = conf.attrs
            s.stage = stages.get(conf.name, "micro")
            s.kernel = None
            s.random = False
            s.system = system_op(conf.op_type)
            if conf.op_type == "input":
                self.input_steps.append(s)
            elif conf.op_type == "output":
                self.output_slots.append((conf.attrs["index"], s.ins[0]))
            if s.system is None:
                op = registry.get(conf.op_type)
                s.kernel = op.kernel_cpu
                s.random = op.random and conf.attrs.get("seed") is None
                s.seed_key = conf.tags.get("seed_of", conf.name)
                s.writes_inputs = bool(op.mutated_inputs(len(conf.inputs), conf.attrs))
            self.steps.append(s)
        self.output_slots.sort()
        self.stages = {st: [s for s in self.steps if s.stage == st] for st in STAGES}

    def launch(self, inputs: list, bindings: dict, overrides: dict | None = None,
               seeds: dict | None = None) -> Future:
        """Run one call now; the returned Future is finished."""
        fut = Future(self._calls)
        self._calls += 1
        try:
            fut.set_result(self._run(inputs, bindings, overrides, seeds, fut))
        except Exception as e:
            fut.set_error(e)
        return fut

    def _run(self, inputs, bindings, overrides, seeds, fut: Future) -> list:
        if seeds is None:
            seeds = draw_seeds(self.job, self._order)
        slots: list = [None] * self.n_slots
        for s in self.input_steps:
            slots[s.outs[0]] = inputs[s.conf.attrs["index"]]
        ctx = _RunContext(slots, bindings, overrides, seeds, self.n_micro, fut)
        self._run_steps(self.stages["pre"], ctx)
        for i in range(self.n_micro):
            ctx.micro = i
            self._run_steps(self.stages["micro"], ctx)
        ctx.micro = 0
        self._run_steps(self.stages["post"], ctx)
        outs = [slots[i] for _, i in self.output_slots]
        for i in self.aliased_outputs:
            outs[i] = outs[i].copy()
        return outs

    def _run_steps(self, steps: list, ctx: "_RunContext") -> None:
        slots = ctx.slots
        for s in steps:
            if s.kernel is None:
                s.system.reference(s, ctx)
                continue
            outs = [np.empty(d.shape, d.dtype.np) for d in s.descs]
            attrs = s.attrs
            ins = [slots[i] for i in s.ins]
            if s.random:
                attrs = dict(attrs, seed=ctx.seeds[s.seed_key][ctx.micro])
            if s.writes_inputs:
                ctx.fut.wrote_state = True
            try:
                s.kernel(ins, outs, attrs)
            except RemoteRankError:   # another rank failed: its error, as it is
                raise
            except Exception as e:
                conf = s.conf
                raise kernel_failure(f"{conf.op_type} (op {conf.name})", conf.scope,
                                     [a.shape for a in ins], e) from e
            for i, o in zip(s.outs, outs):
                slots[i] = o


class _RunContext:
    __slots__ = ("slots", "bindings", "overrides", "seeds", "n", "micro", "acc", "fut")

    def __init__(self, slots, bindings, overrides, seeds, n, fut):
        self.slots, self.bindings, self.overrides, self.seeds = slots, bindings, overrides, seeds
        self.n, self.micro, self.acc, self.fut = n, 0, {}, fut


def _outputs_aliasing_memory(job: Job) -> list:
    """Output indices whose array, run op by op, would be memory the call does not own (state,
    an input, a literal, a view of those) or another output's: the caller gets a copy."""
    from actorflow.job.job import split_blob

    ops = job.op_map()
    seen: set = set()
    out = []
    for o in job.outputs:
        blob = o.inputs[0]
        row = system_op(ops[split_blob(blob)[0]].op_type)
        if (row is not None and row.memory != "own") or blob in seen:
            out.append(o.attrs["index"])
        seen.add(blob)
    return out


__all__ = ["Executor", "Future", "ReferenceExecutor"]
