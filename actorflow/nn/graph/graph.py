"""``nn.Graph``: trace ``build()`` into a Job, optimise it with passes, run it.

The first call with a given input signature (the structure of the arguments with their
constants, every tensor's shape, dtype, device and requires_grad, and the training mode of the
graph's modules) traces ``build`` with a ``LazyInterpreter`` set on the thread (lazy mode),
runs the pass pipeline and makes a ``CompiledGraph`` (``compiled.py``); later calls with the
same signature reuse it. New signatures compile again into a least-recently-used cache of
``config.cache_size`` entries.
A call feeds the input tensors and the live state (parameters, buffers, optimizer state,
learning rates) to the executor and returns eager tensors in the structure ``build`` returned.
"""
from __future__ import annotations

import gc
import inspect
import itertools
import time
import weakref
from collections import OrderedDict

import numpy as np

from actorflow.dispatch.lazy import LazyInterpreter
from actorflow.framework import dtype as dt
from actorflow.nn.graph import args_tree, input_effects, recompile, train_state
from actorflow.nn.graph.args_tree import GraphArgumentError
from actorflow.nn.graph.compiled import CompiledGraph
from actorflow.nn.graph.config import GraphConfig
from actorflow.nn.graph.emission import PassContext
from actorflow.nn.graph.optimizer_emission import (GradScalerState, make_optimizer_pass,
                                                   uses_grad_scaler)
from actorflow.nn.graph.proxy import (GraphModule, Proxy, ProxyModule, ProxyTensor, iter_proxies,
                                      make_proxy)
from actorflow.nn.module import Module
from actorflow.tensor import Tensor, state_generation
from actorflow import vm

_graph_ids = itertools.count()


def graph_numbering(start: int | None = None) -> int:
    """The number the next ``Graph`` gets (``Graph_3``: its name, job and communicator names),
    read without using it up; with ``start``, the next graph gets ``start`` instead
    (``check_plans``' simulation numbers each rank's graphs as a real process would)."""
    global _graph_ids
    n = next(_graph_ids) if start is None else start
    _graph_ids = itertools.count(n)
    return n


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
            t._array_for_write()[...] = float(group["lr"]) * float(group.get("lr_scale", 1.0))


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
        d["_compiles"] = 0
        d["_mode_modules"] = None   # modules whose training flag is part of the signature
        d["_pending_reason"] = None  # why the next compile happens, when not a new signature

    # -- user API --------------------------------------------------------------------------------
    def build(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__} must define build()")

    @property
    def name(self) -> str:
        return self._name

    @property
    def training(self) -> bool:
        """True when an optimizer was added (the graph trains)."""
        return self.config.training

    @property
    def is_compiled(self) -> bool:
        return bool(self._cache)

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, ProxyModule):
            value = value.to(Module)
        if isinstance(value, Module):
            if self._reserved(name):
                raise AttributeError(f"nn.Graph {self._name}: a module can't be named '{name}': "
                                     f"that name is an attribute of nn.Graph itself")
            self._modules[name] = make_proxy(value, name, "", weakref.ref(self))
            self.__dict__["_mode_modules"] = None
            self.__dict__.pop(name, None)
            return
        if isinstance(value, (Tensor, ProxyTensor)):
            raise AttributeError(
                f"nn.Graph {self._name}: a Tensor can't be set as an attribute of a graph "
                f"('{name}'); make it a parameter or buffer of a Module assigned to the graph, "
                f"or pass it to the call as an input")
        if name in self._modules:
            del self._modules[name]
            self.__dict__["_mode_modules"] = None
        object.__setattr__(self, name, value)

    def _reserved(self, name: str) -> bool:
        return (name in self.__dict__ and name not in self._modules) or \
            hasattr(type(self), name)

    def __getattr__(self, name: str):
        mods = self.__dict__.get("_modules")
        if mods is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"(nn.Graph.__init__ was not called: call super().__init__() "
                                 f"first in {type(self).__name__}.__init__)")
        if name in mods:
            return mods[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._modules:
            del self._modules[name]
            self.__dict__["_mode_modules"] = None
        else:
            object.__delattr__(self, name)

    def set_grad_scaler(self, grad_scaler) -> None:
        """The dynamic loss scale of this float16 AMP graph (``nn/graph/optimizer_emission.py``): a
        ``GradScalerState``, a ``flow.amp.GradScaler`` or ``flow.amp.StaticGradScaler`` (or an
        object with OneFlow GradScaler's fields: ``_init_scale``, ``_growth_factor``,
        ``_backoff_factor``, ``_growth_interval``; or StaticGradScaler's ``_scale_factor``).
        Call it in ``__init__`` after ``config.enable_amp(True)`` (float16), before the first
        call."""
        if self._cache:
            raise RuntimeError(f"nn.Graph {self._name}: set_grad_scaler must be called before "
                               f"the first call of the graph")
        if not uses_grad_scaler(self.config):
            raise RuntimeError(f"nn.Graph {self._name}: set_grad_scaler: loss scaling runs "
                               f"with float16 AMP; call config.enable_amp(True) first")
        if not isinstance(grad_scaler, GradScalerState):
            fields = ("_init_scale", "_growth_factor", "_backoff_factor", "_growth_interval")
            if hasattr(grad_scaler, "_scale_factor"):  # OneFlow's StaticGradScaler
                grad_scaler = GradScalerState(grad_scaler._scale_factor, dynamic=False)
            elif all(hasattr(grad_scaler, f) for f in fields):
                grad_scaler = GradScalerState(*(getattr(grad_scaler, f) for f in fields))
            else:
                raise TypeError(f"set_grad_scaler: expected a GradScaler, got "
                                f"{type(grad_scaler).__name__}")
        self.__dict__["_grad_scaler"] = grad_scaler

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
            raise ValueError("add_optimizer: contiguous_params is an eager-mode layout; nn.Graph "
                             "batches the updates of a param group itself (fuse_model_update, "
                             "on by default)")
        if self._cache:
            raise RuntimeError(f"nn.Graph {self._name}: add_optimizer must be called before "
                               f"the first call of the graph")
        self._optimizers.append(_OptimizerEntry(optim, lr_sch, is_sparse))
        self.config.training = True

    def __call__(self, *args, **kwargs):
        compiled, tensors = self._compiled_for(args, kwargs)
        return self._run(compiled, tensors)

    forward = __call__

    def _compiled_for(self, args: tuple, kwargs: dict) -> tuple:
        """``(compiled, input tensors)``: the call's signature compiled (from the cache, or
        traced and compiled now; nothing runs). ``plan_check`` compiles through it alone."""
        try:
            structure, tensors = args_tree.flatten((args, kwargs))
        except GraphArgumentError:
            raise GraphArgumentError(self._bad_argument_message(args, kwargs)) from None
        for t in tensors:
            if t.is_lazy:
                raise GraphArgumentError(
                    f"nn.Graph {self._name}: an input is a lazy tensor; a graph can't be "
                    f"called inside another graph's build()")
        sig = (args_tree.signature(structure, tensors), self._modes())
        compiled = self._cache.get(sig)
        if compiled is not None and compiled.generation != state_generation():
            stale = recompile.stale_binding(self, compiled)
            if stale is not None:  # state it bound was replaced: compile against the new state
                del self._cache[sig]
                compiled.close()
                self.__dict__["_pending_reason"] = stale
                compiled = None
            else:
                compiled.generation = state_generation()
        if compiled is not None and self.config.training:
            changed = recompile.training_changed(self, compiled)
            if changed is not None:  # hyperparameters / groups / frozen parameters changed
                del self._cache[sig]
                compiled.close()
                self.__dict__["_pending_reason"] = changed
                compiled = None
        if compiled is None:
            # a compile allocates many small objects that all stay alive: the cyclic
            # collector's passes over them cost ~15% of a first call (measured), so it waits
            collect = gc.isenabled()
            gc.disable()
            try:
                compiled = self._compile(sig, structure, tensors, args, kwargs)
            finally:
                if collect:
                    gc.enable()
        else:
            self._cache.move_to_end(sig)
        self.__dict__["_last"] = compiled
        return compiled, tensors

    # -- arguments -------------------------------------------------------------------------------
    def _build_signature(self) -> inspect.Signature:
        return inspect.signature(self.build)

    def _arg_names(self) -> tuple:
        """Names of build's positional parameters and of its ``*args`` (or None)."""
        names, var = [], None
        for p in self._build_signature().parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.append(p.name)
            elif p.kind is p.VAR_POSITIONAL:
                var = p.name
        return names, var

    def _bad_argument_message(self, args, kwargs) -> str:
        names, var = self._arg_names()
        named = [(names[i] if i < len(names) else f"{var or 'args'}[{i - len(names)}]", a)
                 for i, a in enumerate(args)] + list(kwargs.items())
        for n, a in named:
            try:
                args_tree.flatten(a, n)
            except GraphArgumentError as e:
                return f"nn.Graph {self._name}: argument {str(e).split(': ', 1)[1]}"
        return f"nn.Graph {self._name}: an argument has a type a graph can't take"

    def _check_binding(self, args, kwargs) -> None:
        sig = self._build_signature()
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise GraphArgumentError(f"nn.Graph {self._name}: the call's arguments don't match "
                                     f"build{sig}: {e}") from None

    def _modes(self) -> tuple:
        """The training flag of every module of the graph (part of the signature: a module
        switched between train() and eval() traces again)."""
        mods = self._mode_modules
        if mods is None:
            mods = []
            for proxy in self._modules.values():
                mods.extend(proxy.to(Module).modules())
            self.__dict__["_mode_modules"] = mods
        return tuple(m.training for m in mods)

    # -- compiling -------------------------------------------------------------------------------
    def _compile(self, sig, structure, tensors, args, kwargs):
        from actorflow.nn.graph.show import debug_compile, debug_passes
        from actorflow.passes import build_pipeline, run_passes

        self._check_binding(args, kwargs)
        names, var = self._arg_names()
        named = args_tree.call_structure(structure, names, var)
        paths = [p for n, s in named for p in args_tree.leaf_paths(s, n)]
        reason = recompile.compile_reason(self, sig, named, paths)
        self.__dict__["_compiles"] += 1
        generation = state_generation()
        train_params, train_key = [], None
        if self.config.training:
            for entry in self._optimizers:
                train_state.sync_lr_tensors(entry)
            train_params = train_state.trained_parameters(self)
            train_state.check_hooks(self, train_params)
            train_key = train_state.training_key(self, train_params)
        t0 = time.perf_counter()
        for proxy in self._modules.values():
            for p in iter_proxies(proxy):
                p._of_gm.calls = 0
        b = LazyInterpreter(self._name, self._state_names(), graph_name=self._name)
        b.namer = self._name_optimizer_state
        b.registered_modules = {id(m) for proxy in self._modules.values()
                                for m in proxy.to(Module).modules()}
        if self.config.zero_stage == 3 and self.config.training:
            from actorflow.nn.graph.zero import shard_parameters

            b.sharded_params = shard_parameters(self)
            b.shard_restore_level = self.config.zero_shard_restore_level
        with b:
            lazy = [self._trace_input(b, i, p, t) for i, (p, t) in enumerate(zip(paths, tensors))]
            in_blobs = input_effects.input_blobs(lazy)
            l_args, l_kwargs = args_tree.unflatten(structure, lazy)
            result = self.build(*l_args, **l_kwargs)
            try:
                out_structure, out_leaves = args_tree.flatten(result, "output")
            except GraphArgumentError as e:
                raise GraphArgumentError(f"nn.Graph {self._name}: build() returned a value it "
                                         f"can't: {str(e).split(': ', 1)[1]}") from None
            for i, (p, t) in enumerate(zip(args_tree.leaf_paths(out_structure, "output"),
                                           out_leaves)):
                b.add_output(i, p, t)
            effects = input_effects.add_effect_outputs(
                b, self._name, lazy, in_blobs, paths, len(out_leaves),
                self.config.accumulation_steps > 1 and self.config.training)
            self._collect_gradients(b)
        forward_job = b.job
        forward_job.verify()
        t1 = time.perf_counter()
        ctx = PassContext(self, b)
        passes = build_pipeline(self.config, ctx, {"optimizer": make_optimizer_pass})
        full_job, log = run_passes(forward_job, passes, input_verified=True)
        if self.config.straighten_mode is not None:  # the compiler reads it (compile_job)
            full_job.train["straighten"] = self.config.straighten_mode in (
                "MemoryFirst", "OverlapCpuGpu", "DelayShortGpu")
        compiled = CompiledGraph(sig, forward_job, full_job, dict(ctx.bindings), out_structure,
                                 log, named, paths, self.config.outputs_buffer_size)
        compiled.generation = generation
        compiled.train_params, compiled.train_key = train_params, train_key
        compiled.input_effects, compiled.n_user_outputs = effects, len(out_leaves)
        # the trace's lazy tensors keep the builder alive in a reference cycle: drop its links
        # back to this graph so deleting the graph frees it (and stops its runtime) at once
        b.namer = None
        b.registered_modules = None
        t2 = time.perf_counter()
        self._cache[sig] = compiled
        evicted = []
        while len(self._cache) > self.config.cache_size:
            evicted.append(self._cache.popitem(last=False)[1])
            evicted[-1].close()
        if self._debug >= 1:
            debug_compile(self, compiled, reason, t1 - t0, t2 - t1, evicted)
        if self._debug >= 2:
            debug_passes(self, compiled)
        if self._debug >= 3:
            print(full_job.summary())
        return compiled

    def _trace_input(self, b: LazyInterpreter, index: int, path: str, t: Tensor) -> Tensor:
        """The lazy tensor build() gets for input ``t``: a micro-batch of it when gradient
        accumulation is on (see ``actorflow.nn.graph.micro_batch``)."""
        n = self.config.accumulation_steps
        if n > 1 and self.config.training and self.config.pass_enabled("gradient_accumulation"):
            from actorflow.nn.graph.micro_batch import add_micro_batch_input

            return add_micro_batch_input(b, index, path, t, n)
        return b.add_input(index, path, t)

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
        """``(name, kind)`` of optimizer state or learning-rate tensor ``t``, else None.

        Compiling names every state tensor, so the lookup must not cost O(parameters): state
        seen once is indexed, and the scan goes newest first (fresh state sits in the
        parameter state dict made last), indexing what it passes."""
        # id(tensor) -> (weak reference to the tensor, name); weak, so that state an optimizer
        # dropped (load_state_dict) is not kept alive
        index = self.__dict__.setdefault("_state_index", {})
        hit = index.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1], "optimizer_state"
        for k, entry in enumerate(self._optimizers):
            for j, lr in enumerate(entry.lr_tensors):
                if lr is t:
                    return f"_optimizer{k}.group{j}.lr", "lr"
            for p, state in reversed(entry.optimizer.state.items()):
                for key, v in state.items():
                    if isinstance(v, Tensor):
                        index[id(v)] = (weakref.ref(v), f"{self._param_name(p)}.{key}")
                    if v is t:
                        return index[id(v)][1], "optimizer_state"
        return None

    def _param_name(self, p: Tensor) -> str:
        """The state name of parameter ``p``. The names are cached (walking the modules for
        every optimizer state tensor made compiling quadratic in the number of parameters) and
        walked again when ``p`` is new to the cache."""
        cache = self.__dict__.get("_param_names")
        hit = cache.get(id(p)) if cache is not None else None
        if hit is None or hit[2] is not p:
            cache = self.__dict__["_param_names"] = self._state_names()
            hit = cache.get(id(p))
        return hit[0] if hit is not None and hit[2] is p else f"param{id(p)}"

    def _collect_gradients(self, b: LazyInterpreter) -> None:
        """Record, for every trained variable, the blob of its gradient (for the optimizer
        pass)."""
        grads = {}
        for name, t in b.bindings.items():
            lazy = b.leaf_of(t)
            if lazy is not None and lazy._grad is not None:
                g = b.lazy_of(lazy._grad)
                grads[name] = g._h.name
        if grads and not self.config.training:
            raise RuntimeError(f"nn.Graph {self._name}: backward() was called in build(), but "
                               f"the graph has no optimizer; add one with "
                               f"self.add_optimizer(...) in __init__")
        b.job.train["grads"] = grads
        if b.sharded_params:
            from actorflow.nn.graph.zero import label_gradients

            label_gradients(b, grads)

    # -- running ---------------------------------------------------------------------------------
    def _lr_snapshot(self) -> dict:
        """The learning-rate variables' values for this call (the runtime reads these instead
        of the shared lr tensors, so a call in flight never sees a later call's lr)."""
        return {f"_optimizer{k}.group{j}.lr":
                np.array(float(group["lr"]) * float(group.get("lr_scale", 1.0)), np.float64)
                for k, entry in enumerate(self._optimizers)
                for j, group in enumerate(entry.optimizer.param_groups)}

    def _run(self, compiled: CompiledGraph, inputs: list):
        """Issue the call as a VM instruction (see ``CompiledGraph.launch``) and return its
        outputs, tensors that become ready when the call completes.

        Issuing the call and recording it (output buffer, scheduler step, call count, writes
        to inputs) is one step for Ctrl-C: a SIGINT in between is raised after the recording,
        so an interrupted call either did not start or is counted whole. The back-pressure
        wait comes after, and Ctrl-C interrupts it at once."""
        with vm.deferred_interrupts():
            for entry in self._optimizers:  # the lr tensors show the latest values (direct
                entry.refresh_lr()          # executor use); a call itself gets a snapshot
            blobs = compiled.launch(inputs, self._lr_snapshot(), self._name)
            tensors = compiled.outputs(blobs)
            compiled.output_buffer[compiled.next_buffer] = tuple(
                Tensor._from_handle(b, tuple(d.shape), d.dtype)
                for b, d in zip(blobs, compiled.out_descs))
            compiled.next_buffer = (compiled.next_buffer + 1) % len(compiled.output_buffer)
            for entry in self._optimizers:
                if entry.lr_scheduler is not None:
                    entry.lr_scheduler.step()
            self.__dict__["_calls"] += 1
            if compiled.input_effects:
                input_effects.apply(compiled.input_effects, inputs, tensors)
        vm.throttle()
        return args_tree.unflatten(compiled.out_structure, tensors[:compiled.n_user_outputs])

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
    def plan(self):
        """The physical Plan of the last call's signature (what the actor runtime runs)."""
        return self._require_compiled().plan

    def register_memory(self) -> dict:
        """``{"with_codegen", "without_codegen"}``: the register memory (bytes) of one step of
        the last call's signature with generated C kernels (which recompute cheap values and
        write in place: ``compiler/codegen/recompute.py``, ``compiler/memory.py``) and on the
        NumPy kernels; the Plan it does not run is compiled for the comparison (and its C
        built, when the graph runs without generation)."""
        return self._require_compiled().register_memory()

    def close(self) -> None:
        """Shut down the actor runtime of every compiled signature: buffers close, actors leave
        after EORD, threads are joined. Also done when the graph is garbage-collected or the
        interpreter exits; a later call starts a fresh runtime."""
        for compiled in self.__dict__.get("_cache", {}).values():
            compiled.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def pass_log(self) -> list:
        """Per pass of the last compile: name, ops added / removed / changed."""
        return self._require_compiled().pass_log

    @property
    def compile_log(self) -> list:
        """Why each recompile happened (one sentence per recompile)."""
        return list(self._compile_log)

    @property
    def compile_count(self) -> int:
        """How many times ``build`` was traced."""
        return self._compiles

    @property
    def call_count(self) -> int:
        return self._calls

    @property
    def _outputs_tensor_tuple_buffer(self) -> list:
        """The output buffer ring of the last call's signature (OneFlow's name)."""
        return self._require_compiled().output_buffer

    def _require_compiled(self):
        if self._last is None:
            raise RuntimeError(f"nn.Graph {self._name} has not been called yet, so it has no "
                               f"Job; call it once with example inputs")
        return self._last

    def debug(self, v_level: int = 0, *, ranks=None, max_py_stack_depth: int = 2,
              only_user_py_stack: bool = True, op_repr_with_py_stack: bool = False) -> None:
        """Print what compiling does: 0 quiet, 1 each compile with the reason for it (what
        changed in the signature), its timings and cache evictions, 2 also each pass's ops
        added / removed / changed, 3 also the full Job after passes. ``ranks`` and the stack
        options are accepted for OneFlow compatibility (one process; no Python stacks)."""
        if not isinstance(v_level, int) or isinstance(v_level, bool) or v_level < -1:
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
        """Turn function ``func`` into a Graph whose build calls it. Modules ``func`` uses from
        its closure are registered in the graph under their variable names."""
        if not inspect.isfunction(func):
            raise TypeError(f"nn.Graph.trace expects a function, got {type(func).__name__}")
        sig = inspect.signature(func)

        def build(self, *args, **kwargs):
            return func(*args, **kwargs)

        cls = type(f"{func.__name__}_graph", (Graph,),
                   {"build": build, "_build_signature": lambda self: sig,
                    "__doc__": func.__doc__})
        g = cls()
        for var, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, (Module, ProxyModule)) and not g._reserved(var):
                setattr(g, var, value)
        return g


__all__ = ["Graph", "GraphModule", "GraphConfig", "CompiledGraph", "Proxy"]
