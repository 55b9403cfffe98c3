"""CompiledGraph: what one input signature of an ``nn.Graph`` compiles to, and how it is called
(OneFlow's NNGraph role).

It owns the traced Job, the Job after passes, the executor that runs it (the actor runtime, or
with ``ACTORFLOW_RUN_GRAPH_BY_VM=1`` the reference executor: both implement
``actorflow.job.executor.Executor``), the state each variable op reads, how to rebuild the
outputs, and the ring of output buffers. ``launch`` makes one call a VM instruction.
"""
from __future__ import annotations

import dataclasses

import os

import numpy as np

from actorflow import vm
from actorflow.compiler import CompileOptions, compile_job
from actorflow.dispatch.global_tensor import wrap
from actorflow.dispatch.lazy_global import output_global, physical
from actorflow.process import groups, watchdog
from actorflow.process.world import world
from actorflow.errors import KernelError, with_note
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.job.executor import Executor, ReferenceExecutor
from actorflow.job.schedule import draw_seeds, seed_draw_order
from actorflow.job.system_ops import system_op
from actorflow.ops import registry
from actorflow.runtime import RuntimeExecutor
from actorflow.tensor import EagerBlob, Tensor, unsynced_array


class CompiledGraph:
    """One compiled signature of a Graph (see the module docstring). ``buffer_size``: how
    many calls' outputs the ring keeps, and how many calls the runtime's source hands out
    ahead (``config.set_outputs_buffer_size``)."""

    def __init__(self, signature, forward_job, full_job, bindings, out_structure,
                 pass_log, named_args=None, input_paths=None, buffer_size=2):
        self.signature = signature
        self.forward_job = forward_job
        self.full_job = full_job
        self.bindings = bindings
        # what this rank's executor reads: a global tensor's shard (each rank runs its own Job)
        self.run_bindings = {k: physical(v) for k, v in bindings.items()}
        self.out_globals = [output_global(o) for o in full_job.outputs]
        self.out_structure = out_structure
        self.pass_log = pass_log
        self.named_args = named_args or []
        self.input_paths = input_paths or []
        self.executor = make_executor(full_job, buffer_size)
        self.state_access = state_access(full_job, self.run_bindings)
        self._seed_order = seed_draw_order(full_job)
        # a distributed Job's random ops run on every rank with rank 0's seeds (as eager-global
        # ops do), so broadcast values agree
        self._distributed = _plan_world_size(full_job) > 1
        # its communicators' key (failure notices name it) and its calls so far (every rank
        # calls a distributed graph the same number of times: notices name the call)
        self._group = full_job.train.get("comm_group")
        self._calls = 0
        # after a failed call of a distributed graph: why later calls are refused (its
        # communicators may hold a collective another rank never joins, which would pair with
        # the next call's: see ``_refuse``)
        self._broken: str | None = None
        self._agree_seeds = world().size > 1 and any(self._seed_order.values()) and any(
            "global" in o.tags for o in full_job.ops)
        self.out_descs = [o.outputs[0] for o in full_job.outputs]
        # The output registers (OneFlow's outputs buffer): each slot holds one call's outputs.
        self.output_buffer = [tuple(Tensor._wrap(np.empty(d.shape, d.dtype.np), d.dtype)
                                    for d in self.out_descs) for _ in range(buffer_size)]
        self.next_buffer = 0
        self.last_call = None
        self._plan = None
        self.generation = -1  # the state generation its bindings were checked at
        # a training graph's parameters and what its update baked in (see train_state)
        self.train_params: list = []
        self.train_key = None
        # (kind, input, output) of build()'s writes to inputs and their gradients (see
        # input_effects); outputs past n_user_outputs carry them
        self.input_effects: list = []
        self.n_user_outputs = len(full_job.outputs)

    @property
    def plan(self):
        """The Plan the actor runtime runs (compiled on first use if the executor runs the Job
        op by op)."""
        if self.executor.plan is not None:
            return self.executor.plan
        if self._plan is None:
            self._plan = compile_job(self.full_job, CompileOptions(
                rank=world().rank, world_size=_plan_world_size(self.full_job)))
        return self._plan

    def register_memory(self) -> dict:
        """Register bytes of one step with and without generated kernels (see
        ``nn.Graph.register_memory``)."""
        plan = self.plan
        opts = CompileOptions(rank=world().rank, world_size=_plan_world_size(self.full_job))
        with_codegen = bool(plan.codegen)
        other = compile_job(self.full_job, dataclasses.replace(opts, codegen=not with_codegen))
        mine, theirs = plan.memory["bytes_with_sharing"], other.memory["bytes_with_sharing"]
        if with_codegen:
            return {"with_codegen": mine, "without_codegen": theirs}
        return {"with_codegen": theirs, "without_codegen": mine}

    def launch(self, inputs: list, lr: dict, name: str) -> list:
        """One graph call as a deferred VM instruction; returns the output blobs, complete when
        the call is.

        The call runs after the last writers of the inputs and of the state it reads, and after
        every earlier access to the state it writes; it feeds the executor and completes when
        the executor's Future does. Calls of one compiled graph form a chain: the executor
        orders them itself, so a call waits for the previous one only to be launched and
        several can be in flight. Eager code that reads a parameter after a call waits for that
        call's update. Random seeds are drawn now, on the caller's thread (the order eager code
        draws them). ``lr``: this call's learning rates (variable name -> array), so calls in
        flight keep theirs. The back-pressure wait is the caller's (``vm.throttle()``)."""
        blobs = [EagerBlob(np.empty(d.shape, d.dtype.np)) for d in self.out_descs]
        executor = self.executor
        seeds = draw_seeds(self.full_job, self._seed_order)
        if self._agree_seeds:  # on the caller's thread, in program order on every rank
            seeds = groups.bcast_object(seeds, 0, f"{name} seeds")
        bindings = self.run_bindings
        inputs = [physical(t) for t in inputs]
        call, self._calls = self._calls, self._calls + 1

        def run(finish) -> None:
            if self._broken is not None:
                self._refuse(call, finish)
                return
            arrays = []
            for t in inputs:
                a = unsynced_array(t)
                arrays.append(a if a.flags.c_contiguous
                              else np.ascontiguousarray(a).reshape(a.shape))

            def done(f) -> None:
                err = f.exception()
                if err is not None:
                    if self._distributed:
                        if self._broken is None:
                            self._broken = f"call {call} failed: {str(err).splitlines()[0]}"
                        # the other ranks may wait for this one (one that only gave up
                        # because of another's notice has nothing to add)
                        notice = None if getattr(err, "from_notice", False) \
                            else str(err).splitlines()[0]
                        watchdog.call_failed(self._group, call, notice=notice)
                    finish(_with_state_note(err, f.wrote_state))
                    return
                # into the blobs' own arrays: eager ops issued on an output before the call
                # finished already hold those arrays
                for b, a in zip(blobs, f.result()):
                    np.copyto(b.raw, a)
                finish()

            executor.launch(arrays, bindings, lr, seeds).add_done_callback(done)

        read, written = self.state_access
        # a failed call poisons only its outputs: the state it writes gets its previous
        # writer back (see _with_state_note for what the error then says)
        # held until the call completes: its outputs and the inputs it keeps alive
        nbytes = sum(b.raw.nbytes for b in blobs) + sum(
            t._h.raw.nbytes for t in inputs if type(t._h) is EagerBlob)
        self.last_call = vm.launch(run, reads=[*inputs, *read], writes=written, creates=blobs,
                                   name=f"{name}-call", deferred=True, chain=self,
                                   nbytes=nbytes, throttle=False)
        return blobs

    def _refuse(self, call: int, finish) -> None:
        """Fail call number ``call`` at once, posting nothing: an earlier call of this
        distributed graph failed, on this rank or (through its failure notice) on another, so
        a collective of that call may be left pending on a rank and would pair with this
        call's. No notice is sent: the earlier failure's notice already fails the other ranks'
        waits of this graph's later calls."""
        err = KernelError(f"graph call refused: {self._broken}; a distributed graph is not "
                          f"called again after a failed call (its communicators may hold an "
                          f"abandoned collective): build a new nn.Graph")
        watchdog.call_failed(self._group, call)
        finish(err)

    def outputs(self, blobs: list) -> list:
        """The call's output tensors over ``blobs``: global ones (this rank's shard) where the
        traced output was global."""
        out = []
        for b, d, g in zip(blobs, self.out_descs, self.out_globals):
            t = Tensor._from_handle(b, tuple(d.shape), d.dtype)
            if g is not None:  # (no shard on a rank outside its placement: another stage)
                local = t if g[0].index(world().rank) is not None else None
                t = wrap(local, g[0], tuple(SbpParallel.from_attr(a) for a in g[1]), g[2],
                         d.dtype)
            out.append(t)
        return out

    def close(self) -> None:
        """Wait for the calls in flight, then shut down the executor (its threads are joined).
        A call's own error is reported at its outputs' sync point, not here."""
        last = self.last_call
        if last is not None and not last.done:
            from actorflow.vm.scheduler import wait_for

            wait_for(last)
        self.executor.close()


def _with_state_note(err: BaseException, wrote_state: bool) -> BaseException:
    """``err`` of a failed call, saying what became of the state it writes."""
    if wrote_state:
        note = ("this call had started updating parameters or optimizer state when it failed: "
                "they hold what it wrote (readable, and overwritten by the next good call)")
    else:
        note = "parameters and optimizer state are as they were before this call"
    if isinstance(err, KernelError):   # (RemoteRankError included: it stays one)
        return with_note(err, f"({note})")
    new = KernelError(f"graph call failed: {type(err).__name__}: {err}\n({note})")
    new.__cause__ = err
    return new


def make_executor(job, buffer_size: int = 2) -> Executor:
    """The executor a graph runs on: the actor runtime, or with ``ACTORFLOW_RUN_GRAPH_BY_VM=1``
    (OneFlow's name for the op-by-op mode) the reference executor."""
    if os.environ.get("ACTORFLOW_RUN_GRAPH_BY_VM", "0") not in ("", "0"):
        return ReferenceExecutor(job)
    return RuntimeExecutor(job, CompileOptions(source_regst_num=buffer_size,
                                               rank=world().rank,
                                               world_size=_plan_world_size(job)))


def _plan_world_size(job) -> int:
    """The ranks that each run their own Plan of ``job``: the world for a distributed (global)
    Job, else 1 (a local graph's Plan is this process's alone)."""
    if world().size > 1 and any("global" in o.tags for o in job.ops):
        return world().size
    return 1


def state_access(job, bindings: dict) -> tuple:
    """``(read, written)``: the bound state tensors a call of ``job`` only reads, and those it
    writes in place (parameters and optimizer state an update writes, running statistics...)."""
    var_of_blob = {o.out(0): o.attrs["name"] for o in job.ops if o.op_type == "variable"}
    # learning rates are passed to every call as values, not read from their tensors
    per_call = {o.attrs["name"] for o in job.ops
                if o.op_type == "variable" and o.attrs.get("kind") == "lr"}
    written: set = set()
    for o in job.ops:
        if system_op(o.op_type) is not None:
            continue
        for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
            if o.inputs[i] in var_of_blob:
                written.add(var_of_blob[o.inputs[i]])
    read = [t for name, t in bindings.items() if name not in written and name not in per_call]
    return read, [bindings[n] for n in sorted(written) if n in bindings]
