"""Building a Job by tracing: the lazy interpreter ``nn.Graph`` pushes while ``build`` runs.

Every op call made while a ``JobBuilder`` is the current interpreter adds an OpConf to the Job
(shape and dtype from the op's own inference) and returns *lazy* tensors: tensors whose handle
is a ``LazyBlob`` naming a blob of the Job. Eager tensors that reach an op (parameters, buffers,
tensors created eagerly in build) become ``variable`` ops the first time they are used. Autograd
records nodes exactly as in eager mode, so ``loss.backward()`` runs the one engine and the
gradient rules' functional calls come back here as backward ops.
"""
from __future__ import annotations

import threading

from actorflow.autograd import grad_mode
from actorflow.dispatch import _old_identity, _record, check_inplace, infer, scope
from actorflow.job.job import SYSTEM_OPS, BlobDesc, Job, OpConf, split_blob, unique_name
from actorflow.ops.registry import get
from actorflow.tensor import Tensor

_ASSIGN = None


class LazyValueError(RuntimeError):
    """A value was asked of a lazy tensor (it has none until the graph runs)."""


class LazyBlob:
    """Lazy storage handle: the blob ``name`` of the Job that ``builder`` is tracing."""

    __slots__ = ("builder", "name")
    is_lazy = True

    def __init__(self, builder, name: str):
        self.builder = builder
        self.name = name

    def get(self):
        graph = getattr(self.builder, "graph_name", "") if self.builder is not None else ""
        raise LazyValueError(
            f"tensor {self.name} is a lazy tensor of nn.Graph {graph!r} being traced: inside "
            f"build() a tensor has a shape and a dtype but no value until the graph runs, so "
            f"numpy(), item(), tolist(), bool() and printing values are not possible there. "
            f"Return the tensor from build() and read it after the call.")

    def describe(self) -> str:
        return f"lazy blob {self.name!r}"


class _Local(threading.local):
    builder = None
    checkpoint: list  # stack of (module path, enabled) of GraphModules being called

    def __init__(self):
        self.checkpoint = []


_local = _Local()


def current_builder():
    """The JobBuilder tracing on this thread, or None (eager mode)."""
    return _local.builder


def lazy_mode_enabled() -> bool:
    return _local.builder is not None


class checkpoint_scope:
    """Ops traced inside belong to a GraphModule whose ``activation_checkpointing`` flag is
    ``enabled`` (used by the activation-checkpointing pass)."""

    def __init__(self, path: str, enabled: bool):
        self.entry = (path, enabled)

    def __enter__(self):
        _local.checkpoint.append(self.entry)

    def __exit__(self, *exc):
        _local.checkpoint.pop()
        return False


def checkpointing_path() -> str | None:
    """The outermost enclosing module path with activation checkpointing on, if any."""
    for path, enabled in _local.checkpoint:
        if enabled:
            return path
    return None


class JobBuilder:
    """The lazy interpreter: appends ops to ``job`` as functional ops are called.

    ``state_names`` maps ``id(tensor)`` of registered state (parameters, buffers) to
    ``(name, kind, tensor)``; other eager tensors become ``free`` variables. ``bindings`` collects,
    per variable op, the eager tensor it reads at run time.
    """

    def __init__(self, job_name: str, state_names: dict | None = None, graph_name: str = ""):
        self.job = Job(job_name)
        self.graph_name = graph_name
        self.state_names = state_names or {}
        self.bindings: dict = {}
        self._lazy_of_eager: dict = {}   # id(eager tensor) -> (eager tensor, lazy tensor)
        self._var_blob: dict = {}        # id(eager tensor) -> blob of its variable op
        self._eager_of_lazy: dict = {}   # id(variable's lazy tensor) -> (lazy, eager tensor)
        self._count = 0
        self._free = 0
        self._readers: dict = {}         # blob -> names of ops that read it
        self._mutated_by: dict = {}      # variable blob -> last op that wrote it
        self.phase = "forward"
        self._names: set = set()
        self._ops: dict = {}
        self.registered_modules = None  # ids of modules the graph owns (None: don't check)
        self.namer = None  # optional: eager tensor -> (name, kind) for unregistered state

    @property
    def namer(self):
        """Optional ``eager tensor -> (name, kind) | None`` naming state the builder meets that
        is not registered (optimizer state, learning rates). A bound method is held weakly: a
        builder outlives its trace in reference cycles and must not keep a Graph alive."""
        ref = self.__dict__.get("_namer")
        return ref() if ref is not None else None

    @namer.setter
    def namer(self, fn) -> None:
        import weakref

        if fn is None:
            self.__dict__["_namer"] = None
        elif hasattr(fn, "__self__"):
            self.__dict__["_namer"] = weakref.WeakMethod(fn)
        else:
            self.__dict__["_namer"] = lambda: fn

    @classmethod
    def over(cls, job: Job, bindings: dict, namer=None, graph_name: str = "") -> "JobBuilder":
        """A builder that appends to existing ``job`` (passes use it to emit ops with the
        functional API); ``bindings`` maps its variable ops to their eager tensors."""
        from actorflow.ops import registry

        b = cls(job.name, graph_name=graph_name)
        b.job = job
        b.namer = namer
        b._count = len(job.ops)
        for o in job.ops:
            b._names.add(o.name)
            b._ops[o.name] = o
            for blob in o.inputs:
                b._readers.setdefault(blob, []).append(o.name)
            if o.op_type not in SYSTEM_OPS:
                for i in registry.get(o.op_type).mutated_inputs(len(o.inputs), o.attrs):
                    b._mutated_by[o.inputs[i]] = o.name
        for o in job.ops_of_type("variable"):
            t = bindings.get(o.name)
            if t is not None:
                b.bindings[o.name] = t
                lazy = b.lazy_tensor(o.out(0), o.outputs[0])
                b._lazy_of_eager[id(t)] = (t, lazy)
                b._var_blob[id(t)] = o.out(0)
                b._eager_of_lazy[id(lazy)] = (lazy, t)
        return b

    def tensor(self, blob: str) -> Tensor:
        """A lazy tensor reading ``blob`` of the Job."""
        return self.lazy_tensor(blob, self._desc(blob))

    # -- entering / leaving --------------------------------------------------------------------
    def __enter__(self) -> "JobBuilder":
        from actorflow.dispatch import push_interpreter

        if _local.builder is not None:
            raise RuntimeError("nn.Graph: tracing a graph inside another graph's build() is not "
                               "supported; call the inner graph outside build(), or use its "
                               "modules directly")
        _local.builder = self
        push_interpreter(self)
        return self

    def __exit__(self, *exc):
        from actorflow.dispatch import pop_interpreter

        pop_interpreter(self)
        _local.builder = None
        return False

    def note_module_call(self, module) -> None:
        """An nn.Module (not a graph proxy) is being called while tracing: warn once if it is
        not registered in the graph (its parameters would become anonymous free variables)."""
        warned = self.__dict__.setdefault("_warned", set())
        if id(module) in warned:
            return
        if self.registered_modules is not None and id(module) not in self.registered_modules:
            import warnings

            warned.add(id(module))
            warnings.warn(f"{module!r} is called in a nn.Graph, but not registered into a "
                          f"nn.Graph", UserWarning, stacklevel=3)

    # -- naming ----------------------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        return unique_name(base, self._names)

    def _op_name(self, op_type: str) -> str:
        path = scope.current_path()
        n = self._count
        self._count += 1
        return self.unique_name(f"{path}-{op_type}-{n}" if path else f"{op_type}-{n}")

    # -- adding ops --------------------------------------------------------------------------------
    def add_op(self, conf: OpConf) -> OpConf:
        """Append ``conf`` (its name must be unique) and record who reads what."""
        for b in conf.inputs:
            self._readers.setdefault(b, []).append(conf.name)
            writer = self._mutated_by.get(b)
            if writer is not None and writer != conf.name and writer not in conf.ctrl_inputs:
                conf.ctrl_inputs.append(writer)
        self.job.ops.append(conf)
        self._ops[conf.name] = conf
        return conf

    def lazy_tensor(self, blob: str, desc: BlobDesc) -> Tensor:
        return Tensor._from_handle(LazyBlob(self, blob), tuple(desc.shape), desc.dtype)

    def add_input(self, index: int, path: str, t: Tensor) -> Tensor:
        """An input op for argument ``path`` (e.g. ``args[0]``), shaped like eager tensor t."""
        name = self.unique_name(f"_input.{path}")
        desc = BlobDesc(tuple(t._shape), t.dtype)
        self.add_op(OpConf(name, "input", [], {"index": index, "path": path}, [desc],
                           tags={"phase": "forward"}))
        lazy = self.lazy_tensor(f"{name}/0", desc)
        lazy.requires_grad = t.requires_grad and t.dtype.is_floating_point
        return lazy

    def add_output(self, index: int, path: str, t: Tensor) -> OpConf:
        src = self.lazy_of(t)
        blob = src._h.name
        name = self.unique_name(f"_output.{path}")
        return self.add_op(OpConf(name, "output", [blob], {"index": index, "path": path},
                                  [self._desc(blob)], tags={"phase": "output"}))

    def _desc(self, blob: str) -> BlobDesc:
        name, idx = split_blob(blob)
        return self._ops[name].outputs[idx]

    def variable(self, t: Tensor) -> Tensor:
        """The lazy tensor standing for eager tensor ``t`` (a variable op, made on first use)."""
        hit = self._lazy_of_eager.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
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
        name = self.unique_name(name)
        desc = BlobDesc(tuple(t._shape), t.dtype)
        self.add_op(OpConf(name, "variable", [], {"name": name, "kind": kind}, [desc],
                           tags={"phase": "state"}))
        self.bindings[name] = t
        lazy = self.lazy_tensor(f"{name}/0", desc)
        lazy.requires_grad = t.requires_grad and t.dtype.is_floating_point
        self._lazy_of_eager[id(t)] = (t, lazy)
        self._var_blob[id(t)] = f"{name}/0"
        self._eager_of_lazy[id(lazy)] = (lazy, t)
        return lazy

    def lazy_of(self, t) -> Tensor:
        """``t`` as a lazy tensor of this Job (eager tensors become variables)."""
        if not isinstance(t, Tensor):
            raise TypeError(f"nn.Graph: expected a Tensor, got {type(t).__name__}")
        h = t._h
        if type(h) is LazyBlob:
            if h.builder is not self:
                raise RuntimeError(f"nn.Graph {self.graph_name!r}: tensor {h.name} belongs to "
                                   f"another graph's trace and can't be used in this one")
            return t
        return self.variable(t)

    def apply(self, op, inputs: list, attrs: dict, out: list | None = None) -> list:
        """The lazy path of ``dispatch.apply``."""
        ins = [self.lazy_of(t) for t in inputs]
        metas = infer(op, ins, attrs)
        if op.random:
            attrs = dict(attrs)
            attrs.setdefault("seed", None)  # None: drawn from the global generator every run
        blobs = [t._h.name for t in ins]
        conf = OpConf(self._op_name(op.name), op.name, blobs, dict(attrs),
                      [BlobDesc(tuple(m[0]), m[1]) for m in metas], scope.current_path(),
                      tags=self._tags())
        for i in op.mutates:
            if i < len(blobs):
                self._order_write(conf, blobs[i])
        self.add_op(conf)
        results = [self.lazy_tensor(conf.out(i), d) for i, d in enumerate(conf.outputs)]
        record = grad_mode._state.enabled and op.grad_fn is not None \
            and any(t.requires_grad for t in ins)
        if out is not None:
            return self._write_in_place(op, ins, inputs, out, results, attrs, record)
        if record:
            _record(op, ins, results, attrs)
        return results

    def _tags(self) -> dict:
        phase = "backward" if grad_mode._state.backward_depth > 0 else self.phase
        tags = {"phase": phase}
        if grad_mode._state.grad_root:  # the seed gradient of a backward() call
            tags = {"phase": "backward", "grad_root": True}
        ck = checkpointing_path()
        if ck is not None:
            tags["checkpointing"] = ck
        return tags

    def _order_write(self, conf: OpConf, blob: str) -> None:
        """``conf`` writes ``blob`` in place: it runs after every earlier reader, and later
        readers run after it."""
        for r in self._readers.get(blob, ()):
            if r != conf.name and r not in conf.ctrl_inputs:
                conf.ctrl_inputs.append(r)
        self._mutated_by[blob] = conf.name

    def _write_in_place(self, op, ins, inputs, out, results, attrs, record) -> list:
        """An in-place op in a Job is an ordinary op; the written tensors are rebound to its
        outputs (lazy tensors), or written back with an ``assign`` op (eager state)."""
        from actorflow.functional import cast

        check_inplace(op, inputs, out, [(r._shape, r.dtype) for r in results], record)
        if record:
            lazy_out = [self.lazy_of(t) for t in out]
            ins = [_old_identity_lazy(t) if any(t is o for o in lazy_out) else t for t in ins]
        written = []
        for t, r in zip(out, results):
            if r.dtype is not t.dtype:
                with grad_mode.no_grad():
                    r = cast(r, t.dtype)
            if type(t._h) is LazyBlob:
                # the lazy tensor a proxy hands out for a parameter or buffer: write the new
                # value back to the eager state too (else e.g. num_batches_tracked.add_(1)
                # in build would change nothing)
                hit = self._eager_of_lazy.get(id(t))
                if hit is not None and hit[0] is t:
                    self._assign(hit[1], r)
                    self._lazy_of_eager[id(hit[1])] = (hit[1], t)
                t._h = r._h
                t._vc[0] += 1
                written.append(t)
            else:
                self._assign(t, r)
                written.append(self.lazy_of(t))
        if record:
            _record(op, ins, written, attrs)
        return list(out)

    def _assign(self, t: Tensor, value: Tensor) -> None:
        """Write lazy ``value`` into eager state ``t`` at run time; later reads of ``t`` in this
        trace see ``value``."""
        global _ASSIGN
        if _ASSIGN is None:
            _ASSIGN = get("assign")
        self.variable(t)
        # the variable's own blob, not the value of an earlier in-place write in this trace
        var_blob = self._var_blob[id(t)]
        conf = OpConf(self._op_name("assign"), "assign", [var_blob, value._h.name], {}, [],
                      scope.current_path(), tags=self._tags())
        self._order_write(conf, var_blob)
        self.add_op(conf)
        fresh = Tensor._from_handle(value._h, tuple(t._shape), t.dtype)
        fresh.requires_grad = value.requires_grad
        fresh.grad_fn, fresh._out_idx = value.grad_fn, value._out_idx
        self._lazy_of_eager[id(t)] = (t, fresh)


def _old_identity_lazy(t: Tensor) -> Tensor:
    # lazy blobs are never overwritten (an in-place op makes a new blob), so the old identity
    # shares the old handle without a copy
    if type(t._h) is not LazyBlob:
        return _old_identity(t)
    a = Tensor._from_handle(t._h, t._shape, t.dtype)
    a.requires_grad, a.grad_fn, a._out_idx = t.requires_grad, t.grad_fn, t._out_idx
    return a
