"""``nn.Graph``: trace ``build()`` into a Job, optimise it with passes, run it.

The first call with a given input signature traces ``build`` with a ``JobBuilder`` pushed on the
dispatcher (lazy mode), runs the pass pipeline and makes an executor; later calls with the same
signature reuse it. A call feeds the input tensors and the live state (parameters, buffers,
optimizer state, learning rates) to the executor and returns eager tensors in the structure
``build`` returned.
"""
from __future__ import annotations

import itertools
import os
import warnings
from collections import OrderedDict

import numpy as np

from actorflow.dispatch import scope
from actorflow.framework import dtype as dt
from actorflow.job import builder as job_builder
from actorflow.job.builder import JobBuilder
from actorflow.job.executor import ReferenceExecutor
from actorflow.nn.graph import args_tree
from actorflow.nn.graph.config import GraphConfig
from actorflow.nn.graph.proxy import GraphModule, ProxyModule, make_proxy
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

_graph_ids = itertools.count()


class _OptimizerEntry:
    """An optimizer added with ``add_optimizer`` and what the graph keeps for it."""

    def __init__(self, optimizer, lr_scheduler, is_sparse: bool):
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.is_sparse = is_sparse
        # one 0-d float64 tensor per param group: the group's current lr, written each call
        self.lr_tensors = [Tensor._wrap(np.zeros((), np.float64), dt.float64)
                           for _ in optimizer.param_groups]

    def refresh_lr(self) -> None:
        for t, group in zip(self.lr_tensors, self.optimizer.param_groups):
            t._array()[...] = float(group["lr"]) * float(group.get("lr_scale", 1.0))


class CompiledGraph:
    """What one input signature compiles to: the traced and the optimised Job, the executor,
    the state each variable op reads, and how to rebuild the outputs."""

    def __init__(self, signature, forward_job, full_job, bindings, out_structure,
                 out_values, pass_log):
        self.signature = signature
        self.forward_job = forward_job
        self.full_job = full_job
        self.bindings = bindings
        self.out_structure = out_structure
        self.out_values = out_values
        self.pass_log = pass_log
        self.executor = _make_executor(full_job)
        self.copy_outputs = _outputs_needing_copy(full_job)


def _make_executor(job):
    """The executor a graph runs on. ``ACTORFLOW_RUN_GRAPH_BY_VM=1`` asks for the reference
    executor (OneFlow's name for the op-by-op mode); it is also the default until the actor
    runtime lands."""
    os.environ.get("ACTORFLOW_RUN_GRAPH_BY_VM")
    return ReferenceExecutor(job)


def _outputs_needing_copy(job) -> list:
    """Output indices whose array would alias state or an input (so the caller gets a copy)."""
    from actorflow.job.job import split_blob

    ops = job.op_map()
    aliasing = ("variable", "input", "literal", "repeat", "unpack")
    return [o.attrs["index"] for o in job.outputs
            if ops[split_blob(o.inputs[0])[0]].op_type in aliasing]


class Graph:
    """Base class of static graphs (``actorflow.nn.Graph``): subclass it, assign modules in
    ``__init__``, write the computation in ``build`` and call the graph like a function."""

    def __init__(self):
        d = self.__dict__
        d["_id"] = next(_graph_ids)
        d["_name"] = f"{type(self).__name__}_{d['_id']}"
        d["config"] = GraphConfig()
        d["_modules"] = OrderedDict()
        d["_optimizers"] = []
        d["_cache"] = OrderedDict()
        d["_debug"] = 0
        d["_last"] = None
        d["_compile_log"] = []
        d["_calls"] = 0

    # -- user API --------------------------------------------------------------------------------
    def build(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__} must define build()")

    @property
    def name(self) -> str:
        return self._name

    @property
    def training(self) -> bool:
        return self.config.training

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, ProxyModule):
            value = value.to(Module)
        if isinstance(value, Module):
            self._modules[name] = make_proxy(value, name, "", self)
            return
        if isinstance(value, Tensor):
            raise AttributeError(
                f"nn.Graph {self._name}: a Tensor can't be set as an attribute of a graph "
                f"('{name}'); make it a parameter or buffer of a Module assigned to the graph, "
                f"or pass it to the call as an input")
        if name in self._modules:
            del self._modules[name]
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        mods = self.__dict__.get("_modules")
        if mods is not None and name in mods:
            return mods[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def add_optimizer(self, optim, *, lr_sch=None, is_sparse: bool = False) -> None:
        """Train with ``optim`` (its update ops join the Job) and step ``lr_sch`` once per
        call. Call it in ``__init__``, before the first call."""
        from actorflow.optim.lr_scheduler import LRScheduler
        from actorflow.optim.optimizer import Optimizer

        if not isinstance(optim, Optimizer):
            raise TypeError(f"add_optimizer: expected an actorflow Optimizer, got "
                            f"{type(optim).__name__}")
        if lr_sch is not None:
            if not isinstance(lr_sch, LRScheduler):
                raise TypeError(f"add_optimizer: lr_sch must be an LRScheduler, got "
                                f"{type(lr_sch).__name__}")
            if lr_sch.optimizer is not optim:
                raise ValueError("add_optimizer: lr_sch schedules a different optimizer")
        if any(g.get("contiguous_params") for g in optim.param_groups):
            raise ValueError("add_optimizer: contiguous_params is an eager-mode layout; in "
                             "nn.Graph use config.allow_fuse_model_update_ops() instead")
        if self._cache:
            raise RuntimeError(f"nn.Graph {self._name}: add_optimizer must be called before "
                               f"the first call of the graph")
        self._optimizers.append(_OptimizerEntry(optim, lr_sch, is_sparse))
        self.config.training = True

    def __call__(self, *args, **kwargs):
        structure, leaves = args_tree.flatten((args, kwargs), "")
        _check_inputs(self, leaves)
        sig = args_tree.signature(structure, leaves)
        compiled = self._cache.get(sig)
        if compiled is None:
            compiled = self._compile(sig, structure, leaves)
        else:
            self._cache.move_to_end(sig)
        self.__dict__["_last"] = compiled
        return self._run(compiled, [t for _, t in leaves])

    forward = __call__

    # -- compiling -------------------------------------------------------------------------------
    def _compile(self, sig, structure, leaves):
        from actorflow.passes import build_pipeline, run_passes

        if self._debug >= 1:
            prev = self._last
            if prev is None:
                print(f"[{self._name}] compiling for input signature {sig[1]}")
            else:
                why = args_tree.describe_difference(prev.signature, sig)
                print(f"[{self._name}] recompiling: {why}")
        if self._last is not None:
            self._compile_log.append(args_tree.describe_difference(self._last.signature, sig))
        b = JobBuilder(self._name, self._state_names(), graph_name=self._name)
        b.namer = self._name_optimizer_state
        b.registered_modules = {id(m) for proxy in self._modules.values()
                                for m in proxy.to(Module).modules()}
        with b:
            lazy_leaves = [b.add_input(i, p or f"arg{i}", t) for i, (p, t) in enumerate(leaves)]
            args, kwargs = args_tree.unflatten(structure, lazy_leaves)
            result = self._trace_build(args, kwargs)
            out_structure, out_leaves = args_tree.flatten(result, "output")
            for i, (p, t) in enumerate(out_leaves):
                b.add_output(i, p, t)
            self._collect_gradients(b)
        forward_job = b.job
        forward_job.verify()
        ctx = _PassContext(self, b)
        passes = build_pipeline(self.config, ctx)
        full_job, log = run_passes(forward_job.copy(), passes)
        compiled = CompiledGraph(sig, forward_job, full_job, dict(ctx.bindings), out_structure,
                                 None, log)
        if self._debug >= 2:
            for entry in log:
                print(f"[{self._name}] pass {entry['name']}: {entry['summary']}")
        self._cache[sig] = compiled
        while len(self._cache) > self.config.cache_size:
            self._cache.popitem(last=False)
        return compiled

    def _trace_build(self, args, kwargs):
        try:
            return self.build(*args, **kwargs)
        except TypeError as e:
            import inspect

            try:
                inspect.signature(self.build).bind(*args, **kwargs)
            except TypeError as bind_error:
                raise TypeError(f"nn.Graph {self._name}: the call's arguments don't match "
                                f"build{inspect.signature(self.build)}: {bind_error}") from None
            raise e

    def _state_names(self) -> dict:
        names: dict = {}
        for mname, proxy in self._modules.items():
            m = proxy.to(Module)
            for pname, p in m.named_parameters(prefix=mname):
                if p is not None:
                    names.setdefault(id(p), (pname, "parameter", p))
            for bname, buf in m.named_buffers(prefix=mname):
                if buf is not None:
                    names.setdefault(id(buf), (bname, "buffer", buf))
        return names

    def _name_optimizer_state(self, t: Tensor):
        """``(name, kind)`` of optimizer state or learning-rate tensor ``t``, else None."""
        state_names = self._state_names()
        for k, entry in enumerate(self._optimizers):
            for j, lr in enumerate(entry.lr_tensors):
                if lr is t:
                    return f"_optimizer{k}.group{j}.lr", "lr"
            for p, state in entry.optimizer.state.items():
                for key, v in state.items():
                    if v is t:
                        pname = state_names.get(id(p), (f"param{id(p)}",))[0]
                        return f"{pname}.{key}", "optimizer_state"
        return None

    def _collect_gradients(self, b: JobBuilder) -> None:
        """Record, for every trained variable, the blob of its gradient (for the optimizer
        pass)."""
        grads = {}
        for name, t in b.bindings.items():
            lazy = b._lazy_of_eager.get(id(t), (None, None))[1]
            if lazy is not None and lazy._grad is not None:
                g = b.lazy_of(lazy._grad)
                grads[name] = g._h.name
        if grads and not self.config.training:
            raise RuntimeError(f"nn.Graph {self._name}: backward() was called in build(), but "
                               f"the graph has no optimizer; add one with "
                               f"self.add_optimizer(...) in __init__")
        b.job.train["grads"] = grads

    # -- running ---------------------------------------------------------------------------------
    def _run(self, compiled: CompiledGraph, inputs: list):
        for entry in self._optimizers:
            entry.refresh_lr()
        arrays = [np.ascontiguousarray(t._array()) for t in inputs]
        outs = compiled.executor.run(arrays, compiled.bindings)
        for i in compiled.copy_outputs:
            outs[i] = outs[i].copy()
        descs = [o.outputs[0] for o in compiled.full_job.outputs]
        tensors = [Tensor._wrap(a, d.dtype) for a, d in zip(outs, descs)]
        for entry in self._optimizers:
            if entry.lr_scheduler is not None:
                entry.lr_scheduler.step()
        self.__dict__["_calls"] += 1
        args = args_tree.unflatten(compiled.out_structure, tensors)
        return args

    # -- inspection --------------------------------------------------------------------------------
    @property
    def forward_job(self):
        """The Job of the last call's signature as traced (before passes)."""
        return self._require_compiled().forward_job

    @property
    def full_job(self):
        """The Job of the last call's signature after every pass."""
        return self._require_compiled().full_job

    @property
    def pass_log(self) -> list:
        """Per pass of the last compile: name, ops added / removed / changed."""
        return self._require_compiled().pass_log

    @property
    def compile_log(self) -> list:
        """Why each recompile happened (one sentence per recompile)."""
        return list(self._compile_log)

    def _require_compiled(self):
        if self._last is None:
            raise RuntimeError(f"nn.Graph {self._name} has not been called yet, so it has no "
                               f"Job; call it once with example inputs")
        return self._last

    def debug(self, v_level: int = 0, *, ranks=None, max_py_stack_depth: int = 2,
              only_user_py_stack: bool = True, op_repr_with_py_stack: bool = False) -> None:
        """Verbosity of compile messages: 0 quiet, 1 compiles and the reasons for recompiles,
        2 also each pass's diff, 3 also the full Job after passes."""
        if not isinstance(v_level, int) or v_level < -1:
            raise ValueError(f"debug: v_level must be an int >= -1, got {v_level!r}")
        self.__dict__["_debug"] = v_level

    def state_dict(self, destination=None) -> dict:
        """Module states by attribute name, plus optimizer and scheduler states."""
        from actorflow.nn.graph.state import graph_state_dict

        return graph_state_dict(self, destination)

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """Inverse of ``state_dict``."""
        from actorflow.nn.graph.state import graph_load_state_dict

        graph_load_state_dict(self, state_dict, strict)

    def __repr__(self) -> str:
        from actorflow.nn.graph.show import graph_repr

        return graph_repr(self)

    @staticmethod
    def trace(func):
        """Turn function ``func`` into a Graph whose build calls it."""
        import inspect

        if not inspect.isfunction(func):
            raise TypeError(f"nn.Graph.trace expects a function, got {type(func).__name__}")

        def build(self, *args, **kwargs):
            return func(*args, **kwargs)

        cls = type(f"{func.__name__}_graph", (Graph,), {"build": build})
        return cls()


def _check_inputs(graph: Graph, leaves: list) -> None:
    for path, t in leaves:
        if t.is_lazy:
            raise TypeError(f"nn.Graph {graph.name}: input {path} is a lazy tensor; a graph "
                            f"can't be called inside another graph's build()")


class _PassContext:
    """What passes may need from the Graph: its optimizers and config, and a way to add
    variables (learning rates, scaler state) the run must bind."""

    def __init__(self, graph: Graph, builder: JobBuilder):
        self.graph = graph
        self.config = graph.config
        self.optimizers = graph._optimizers
        self.state_names = builder.state_names
        self.namer = graph._name_optimizer_state
        self.bindings = builder.bindings  # variable op name -> eager tensor; passes add to it


def warn_unregistered(module: Module) -> None:
    """Warn that ``module`` runs inside a graph without being registered in it."""
    warnings.warn(f"{module!r} is called in a nn.Graph, but not registered into a nn.Graph",
                  UserWarning, stacklevel=3)


__all__ = ["Graph", "GraphModule", "GraphConfig", "CompiledGraph", "job_builder", "scope"]
