"""The lazy interpreter: what ``nn.Graph`` sets on the thread while it traces ``build``.

Every op call made while a ``LazyInterpreter`` is the thread's interpreter adds an OpConf to
the Job (shape and dtype from the op's own inference, through a ``JobBuilder``) and returns
*lazy* tensors: tensors whose handle is a ``LazyBlob`` naming a blob of the Job. Eager tensors
that reach an op (parameters, buffers, tensors created eagerly in build) become ``variable``
ops the first time they are used. Autograd records nodes after this interpreter as after the
eager one, so ``loss.backward()`` runs the one engine and the gradient rules' functional calls
come back here as backward ops.
"""
from __future__ import annotations

import warnings
import weakref

from actorflow import scope
from actorflow.autograd import grad_mode
from actorflow.dispatch import lazy_views
from actorflow.dispatch.common import check_inplace, infer
from actorflow.dispatch.eager import old_identity as _eager_old_identity
from actorflow.job.builder import JobBuilder
from actorflow.job.job import BlobDesc, Job, OpConf, split_blob
from actorflow.ops import registry
from actorflow.tensor import MetaBlob, Tensor

class LazyValueError(RuntimeError):
    """A value was asked of a lazy tensor (it has none until the graph runs)."""


class LazyBlob(MetaBlob):
    """Lazy storage handle: the blob ``name`` of the Job that ``tracer`` is tracing."""

    __slots__ = ("tracer",)

    def __init__(self, tracer, name: str):
        super().__init__(name)
        self.tracer = tracer

    def get(self):
        graph = self.tracer.graph_name if self.tracer is not None else ""
        raise LazyValueError(
            f"tensor {self.name} is a lazy tensor of nn.Graph {graph!r} being traced: inside "
            f"build() a tensor has a shape and a dtype but no value until the graph runs, so "
            f"numpy(), item(), tolist(), bool() and printing values are not possible there. "
            f"Return the tensor from build() and read it after the call.")

    def describe(self) -> str:
        return f"lazy blob {self.name!r}"


def current_tracer() -> "LazyInterpreter | None":
    """The LazyInterpreter tracing on this thread, or None (eager mode)."""
    interp = scope.state.interpreter
    return interp if type(interp) is LazyInterpreter else None


class LazyInterpreter:
    """Turns op calls into ops of ``job`` (see the module docstring).

    ``state_names`` maps ``id(tensor)`` of registered state (parameters, buffers) to
    ``(name, kind, tensor)``; other eager tensors become ``free`` variables. ``bindings``
    collects, per variable op, the eager tensor it reads at run time. ``with tracer:`` makes it
    the thread's interpreter.
    """

    def __init__(self, job_name: str, state_names: dict | None = None, graph_name: str = ""):
        self.builder = JobBuilder(job_name)
        self.graph_name = graph_name
        self.state_names = state_names or {}
        self.bindings: dict = {}
        self._lazy_of_eager: dict = {}   # id(eager tensor) -> (eager tensor, lazy tensor)
        self._var_blob: dict = {}        # id(eager tensor) -> blob of its variable op
        self._eager_of_lazy: dict = {}   # id(variable's lazy tensor) -> (lazy, eager tensor)
        # ZeRO stage 3: id -> parameter whose split(0) variable build() reads as
        # lazy_global.restore_for_use gives it at shard_restore_level (0: the shard itself,
        # 1 and 2: all-gathered); its variable's lazy tensor (the autograd leaf)
        self.sharded_params: dict = {}
        self.shard_restore_level = 1  # (nn.Graph sets it from its config)
        self._leaf_of_eager: dict = {}
        self._free = 0
        self._global = False  # whether a global tensor has been traced
        self.phase = "forward"
        self.registered_modules = None  # ids of modules the graph owns (None: don't check)
        self.namer = None  # optional: eager tensor -> (name, kind) for unregistered state
        self._scope = None
        # dispatch/lazy_views: the views (and detached aliases) traced, by id(view tensor);
        # whether a view is being made again from its written base (not noted anew)
        self.views: dict = {}
        self.regenerating = False

    @property
    def job(self) -> Job:
        """The Job being built."""
        return self.builder.job

    @property
    def namer(self):
        """Optional ``eager tensor -> (name, kind) | None`` naming state the tracer meets that
        is not registered (optimizer state, learning rates). A bound method is held weakly: a
        tracer outlives its trace in reference cycles and must not keep a Graph alive."""
        ref = self.__dict__.get("_namer")
        return ref() if ref is not None else None

    @namer.setter
    def namer(self, fn) -> None:
        if fn is None:
            self.__dict__["_namer"] = None
        elif hasattr(fn, "__self__"):
            self.__dict__["_namer"] = weakref.WeakMethod(fn)
        else:
            self.__dict__["_namer"] = lambda: fn

    @classmethod
    def over(cls, job: Job, bindings: dict, namer=None, graph_name: str = "") -> "LazyInterpreter":
        """A tracer appending to existing ``job`` (passes use it to emit ops with the
        functional API); ``bindings`` maps its variable ops to their eager tensors."""
        t = cls(job.name, graph_name=graph_name)
        t.builder = JobBuilder.over(job)
        t.namer = namer
        t._global = any("global" in o.tags for o in job.ops)  # a distributed graph's Job
        for o in job.ops_of_type("variable"):
            eager = bindings.get(o.name)
            if eager is not None:
                t.bindings[o.name] = eager
                lazy = t.tensor(o.out(0))
                t._lazy_of_eager[id(eager)] = (eager, lazy)
                t._var_blob[id(eager)] = o.out(0)
                t._eager_of_lazy[id(lazy)] = (lazy, eager)
        return t

    def tensor(self, blob: str) -> Tensor:
        """A lazy tensor reading ``blob`` of the Job (a global lazy one when its producer is
        tagged global: see ``actorflow.dispatch.lazy_global``)."""
        if self._global:
            # late: lazy_global builds on this module
            from actorflow.dispatch.lazy_global import tensor_of_blob

            g = tensor_of_blob(self, blob, self.builder.producer(blob))
            if g is not None:
                return g
        return self.lazy_tensor(blob, self.builder.desc(blob))

    # -- entering / leaving --------------------------------------------------------------------
    def __enter__(self) -> "LazyInterpreter":
        if current_tracer() is not None:
            raise RuntimeError("nn.Graph: tracing a graph inside another graph's build() is not "
                               "supported; call the inner graph outside build(), or use its "
                               "modules directly")
        self._scope = scope.interpreter_scope(self)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        s, self._scope = self._scope, None
        s.__exit__(*exc)
        self.views = {}  # the trace's views are done (they hold its tensors)
        return False

    def note_module_call(self, module) -> None:
        """An nn.Module (not a graph proxy) is being called while tracing: warn once if it is
        not registered in the graph (its parameters would become anonymous free variables)."""
        warned = self.__dict__.setdefault("_warned", set())
        if id(module) in warned:
            return
        if self.registered_modules is not None and id(module) not in self.registered_modules:
            warned.add(id(module))
            warnings.warn(f"{module!r} is called in a nn.Graph, but not registered into a "
                          f"nn.Graph", UserWarning, stacklevel=3)

    # -- tensors ---------------------------------------------------------------------------------
    def lazy_tensor(self, blob: str, desc: BlobDesc) -> Tensor:
        return Tensor._from_handle(LazyBlob(self, blob), tuple(desc.shape), desc.dtype)

    def add_input(self, index: int, path: str, t: Tensor) -> Tensor:
        """An input op for argument ``path`` (e.g. ``args[0]``), shaped like eager tensor t."""
        name = self.builder.unique_name(f"_input.{path}")
        desc = BlobDesc(tuple(t._shape), t.dtype)
        conf = self.builder.add_op(OpConf(name, "input", [], {"index": index, "path": path},
                                          [desc], tags={"phase": "forward"}))
        if t.is_global:
            lazy = self._trace_global(t, conf)
        else:
            lazy = self.lazy_tensor(f"{name}/0", desc)
        lazy.requires_grad = t.requires_grad and t.dtype.is_differentiable
        return lazy

    def add_output(self, index: int, path: str, t: Tensor) -> OpConf:
        """An output op returning ``t`` as output ``index`` (``path`` in build's result)."""
        lazy_views.refresh(self, t)  # a view whose base was written since it was made
        lazy = self.lazy_of(t)
        blob = lazy._h.name
        name = self.builder.unique_name(f"_output.{path}")
        tags = {"phase": "output"}
        if blob is None:  # a global tensor of another rank's stage: an empty placeholder
            # late: lazy_global builds on this module
            from actorflow.dispatch.lazy_global import absent_output

            return absent_output(self, index, path, name, lazy)
        g = self.builder.producer(blob).tags.get("global")
        if lazy.is_global and g is not None:  # returned as a global tensor of this layout
            tags["global"] = dict(g, **{"in": (), "out": (g["out"][split_blob(blob)[1]],),
                                        "logical": (tuple(lazy._shape),)})
        return self.builder.add_op(OpConf(name, "output", [blob], {"index": index, "path": path},
                                          [self.builder.desc(blob)], tags=tags))

    def variable(self, t: Tensor) -> Tensor:
        """The lazy tensor standing for eager tensor ``t`` (a variable op, made on first use)."""
        hit = self._lazy_of_eager.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if t.is_global and getattr(t._h, "local", 0) is None:
            # another rank's stage's state: no variable in this rank's Job
            from actorflow.dispatch.lazy_global import interpreter_for

            return interpreter_for(self).absent(t)
        entry = self.state_names.get(id(t))
        namer = self.namer
        named = namer(t) if entry is None and namer is not None else None
        if entry is not None and entry[2] is t:
            name, kind = entry[0], entry[1]
        elif named is not None:
            name, kind = named
        else:
            name, kind = f"_free_tensor_{self._free}", "free"
            self._free += 1
        name = self.builder.unique_name(name)
        desc = BlobDesc(tuple(t._shape), t.dtype)
        conf = self.builder.add_op(OpConf(name, "variable", [], {"name": name, "kind": kind},
                                          [desc], tags={"phase": "state"}))
        self.bindings[name] = t
        if t.is_global:
            lazy = self._trace_global(t, conf)
        else:
            lazy = self.lazy_tensor(f"{name}/0", desc)
        lazy.requires_grad = t.requires_grad and t.dtype.is_differentiable
        self._var_blob[id(t)] = f"{name}/0"
        self._eager_of_lazy[id(lazy)] = (lazy, t)
        if self.sharded_params.get(id(t)) is t:
            # late: lazy_global builds on this module
            from actorflow.dispatch.lazy_global import restore_for_use

            self._leaf_of_eager[id(t)] = lazy
            lazy = restore_for_use(self, lazy, name, self.shard_restore_level)
        self._lazy_of_eager[id(t)] = (t, lazy)
        return lazy

    def leaf_of(self, t: Tensor) -> Tensor | None:
        """The lazy tensor of eager state ``t``'s variable that autograd accumulates its
        gradient on (the variable itself; for a ZeRO stage-3 parameter, its split(0) shard
        rather than the gathered value build() reads), or None when ``t`` is not traced."""
        leaf = self._leaf_of_eager.get(id(t))
        if leaf is not None:
            return leaf
        return self._lazy_of_eager.get(id(t), (None, None))[1]

    def _trace_global(self, t: Tensor, conf: OpConf) -> Tensor:
        """Global eager ``t`` read by ``conf`` (a variable or input op): this rank's shard."""
        # late: lazy_global builds on this module
        from actorflow.dispatch.lazy_global import trace_variable

        self._global = True
        return trace_variable(self, t, conf)

    def eager_of(self, t: Tensor) -> Tensor | None:
        """The eager state tensor that lazy tensor ``t`` stands for (a variable), or None."""
        hit = self._eager_of_lazy.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None

    def lazy_of(self, t) -> Tensor:
        """``t`` as a lazy tensor of this Job (eager tensors become variables)."""
        if not isinstance(t, Tensor):
            raise TypeError(f"nn.Graph: expected a Tensor, got {type(t).__name__}")
        h = t._h
        if isinstance(h, LazyBlob):
            if h.tracer is not self:
                raise RuntimeError(f"nn.Graph {self.graph_name!r}: tensor {h.name} belongs to "
                                   f"another graph's trace and can't be used in this one")
            return t
        return self.variable(t)

    # -- the interpreter -------------------------------------------------------------------------
    def apply(self, op, inputs: list, attrs: dict, out: list | None, record: bool):
        """``(results, node inputs, node outputs, then)``: see ``actorflow.dispatch.apply``.
        Views whose base was written are made again first; ``then`` writes a written view back
        into its base, or notes the views a view op made (``lazy_views``)."""
        lazy_views.refresh_all(self, inputs, out)
        results, ins, outs = self._add(op, inputs, attrs, out, record)
        return results, ins, outs, lazy_views.after_step(self, op, inputs, attrs, out, results)

    def _add(self, op, inputs: list, attrs: dict, out: list | None, record: bool):
        """The op added to the Job: ``(results, node inputs, node outputs)``."""
        ins = [self.lazy_of(t) for t in inputs]
        metas = infer(op, ins, attrs)
        if op.random:
            attrs = dict(attrs)
            attrs.setdefault("seed", None)  # None: drawn from the global generator every run
        blobs = [t._h.name for t in ins]
        conf = OpConf(self.builder.op_name(scope.current_path(), op.name), op.name, blobs,
                      dict(attrs), [BlobDesc(tuple(m[0]), m[1]) for m in metas],
                      scope.current_path(), tags=self._tags())
        for i in op.mutated_inputs(len(blobs), attrs):
            self.builder.order_write(conf, blobs[i])
        self.builder.add_op(conf)
        results = [self.lazy_tensor(conf.out(i), d) for i, d in enumerate(conf.outputs)]
        if out is not None:
            return self._write_in_place(op, ins, inputs, out, results, record)
        return results, ins, results

    def old_identity(self, t: Tensor, alias: bool = False) -> Tensor:
        """``t``'s pre-op value and autograd identity as a tensor of its own, for a gradient
        rule (or a view's base) that needs what an in-place op is about to replace. A tensor of
        this trace (``LazyBlob``, ``LazyGlobalBlob``) shares its handle: lazy blobs are never
        overwritten (an in-place op makes a new blob). Eager state gets a copy of its current
        value, or with ``alias`` shares its memory (the same tensor under another identity)."""
        if getattr(t._h, "tracer", None) is not self and not alias:
            return _eager_old_identity(t)
        a = Tensor._from_handle(t._h, tuple(t._shape), t.dtype)
        a.requires_grad, a.grad_fn, a._out_idx = t.requires_grad, t.grad_fn, t._out_idx
        return a

    def _tags(self) -> dict:
        phase = "backward" if grad_mode._state.backward_depth > 0 else self.phase
        tags = {"phase": phase}
        if grad_mode._state.grad_root:  # the seed gradient of a backward() call
            tags = {"phase": "backward", "grad_root": True}
        ck = scope.checkpointing_path()
        if ck is not None:
            tags["checkpointing"] = ck
        return tags

    def _write_in_place(self, op, ins, inputs, out, results, record):
        """An in-place op in a Job is an ordinary op; the written tensors are rebound to its
        outputs (lazy tensors), or written back with an ``assign`` op (eager state)."""
        from actorflow.dispatch import apply  # late: dispatch.apply imports this module

        check_inplace(op, inputs, out, [(r._shape, r.dtype) for r in results], record)
        if record:
            lazy_out = [self.lazy_of(t) for t in out]
            ins = [self.old_identity(t) if any(t is o for o in lazy_out) else t for t in ins]
        written = []
        for t, r in zip(out, results):
            if r.dtype is not t.dtype:
                with grad_mode.no_grad():
                    r = apply(registry.get("cast"), [r], {"dtype": t.dtype})[0]
            written.append(self.rebind(t, r, self._assign_read))
        return list(out), ins, written

    def rebind(self, t: Tensor, r: Tensor, assign) -> Tensor:
        """Written tensor ``t`` takes lazy result ``r``; returns the tensor autograd records
        as the write's output. A tensor of this trace is rebound to ``r`` (and the eager state
        a variable's lazy tensor stands for - a parameter, a buffer - is written back too: else
        e.g. ``num_batches_tracked.add_(1)`` in build would change nothing); eager state used
        directly is written at run time. ``assign(eager, value)``: writes ``value`` into eager
        state (an ``assign`` op) and returns the lazy tensor later reads of it see."""
        if getattr(t._h, "tracer", None) is self:
            eager = self.eager_of(t)
            if eager is not None:
                assign(eager, r)
                self._lazy_of_eager[id(eager)] = (eager, t)
            t._h = r._h
            t._vc[0] += 1
            return t
        return assign(t, r)

    def _assign_read(self, t: Tensor, value: Tensor) -> Tensor:
        """``_assign``, then the lazy tensor later reads of ``t`` see."""
        self._assign(t, value)
        return self.lazy_of(t)

    def _assign(self, t: Tensor, value: Tensor) -> None:
        """Write lazy ``value`` into eager state ``t`` at run time; later reads of ``t`` in this
        trace see ``value``."""
        self.variable(t)
        # the variable's own blob, not the value of an earlier in-place write in this trace
        var_blob = self._var_blob[id(t)]
        conf = OpConf(self.builder.op_name(scope.current_path(), "assign"), "assign",
                      [var_blob, value._h.name], {}, [], scope.current_path(), tags=self._tags())
        self.builder.order_write(conf, var_blob)
        self.builder.add_op(conf)
        fresh = Tensor._from_handle(value._h, tuple(t._shape), t.dtype)
        fresh.requires_grad = value.requires_grad
        fresh.grad_fn, fresh._out_idx = value.grad_fn, value._out_idx
        self._lazy_of_eager[id(t)] = (t, fresh)
