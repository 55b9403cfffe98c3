"""Proxies: how a Graph sees the modules assigned to it.

``graph.model = model`` wraps ``model`` (and, as they are reached, its submodules) in a
``ProxyModule``. A proxy is an instance of a class derived from both ``ProxyModule`` and the
module's own class, so ``isinstance(proxy, nn.Linear)`` holds and the class's methods run with
``self`` being the proxy; every attribute it does not have is read from (and written to) the
original module, so eager and graph share one model. Inside ``build`` a proxy returns the lazy
tensor of each parameter and buffer, children come back as proxies (also through ``_modules``,
so Sequential, ModuleList - slicing included - and ModuleDict work), and calling a proxy runs the
module's forward under its module path. ``proxy.to(nn.Module)`` returns the original and
``proxy.to(GraphModule)`` the per-module graph options.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict

from actorflow.dispatch import scope
from actorflow.job import builder as job_builder
from actorflow.nn.module import Module, _calls
from actorflow.tensor import Tensor


class Proxy:
    """Base of the objects a Graph puts in front of its modules (``flow.nn.graph.Proxy``)."""


class GraphModule:
    """Graph-only options and facts of one module in a Graph (``proxy.to(GraphModule)``)."""

    def __init__(self, name: str, prefix: str, module: Module):
        self._name = name
        self._prefix = prefix
        self._type = type(module).__name__
        self.activation_checkpointing = False
        self.stage_id = None
        self.stage_placement = None
        self.ins: list = []   # shapes seen by the last trace
        self.outs: list = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def name_prefix(self) -> str:
        return self._prefix

    @property
    def path(self) -> str:
        return self._prefix + self._name

    def set_stage(self, stage_id: int, placement=None) -> None:
        """Record the pipeline stage of this module (used by pipeline parallelism, which runs
        with the distributed work; on one process every stage runs on the same device)."""
        if not isinstance(stage_id, int) or stage_id < 0:
            raise ValueError(f"set_stage: stage_id must be an int >= 0, got {stage_id!r}")
        self.stage_id = stage_id
        self.stage_placement = placement

    @property
    def activation_checkpointing(self) -> bool:
        return self._ckpt

    @activation_checkpointing.setter
    def activation_checkpointing(self, value: bool) -> None:
        self._ckpt = bool(value)

    def __repr__(self) -> str:
        return (f"GraphModule(name={self.path!r}, type={self._type}, "
                f"activation_checkpointing={self._ckpt}, stage_id={self.stage_id})")


_proxy_classes: dict = {}


def _proxy_class(cls: type) -> type:
    pc = _proxy_classes.get(cls)
    if pc is None:
        pc = type(cls.__name__, (ProxyModule, cls), {"__module__": cls.__module__,
                                                     "__qualname__": cls.__qualname__})
        _proxy_classes[cls] = pc
    return pc


def make_proxy(module: Module, name: str, prefix: str, graph) -> "ProxyModule":
    """A proxy of ``module`` registered in ``graph`` as ``prefix + name``."""
    p = object.__new__(_proxy_class(type(module)))
    d = p.__dict__
    d["_of_origin"] = module
    d["_of_graph"] = weakref.ref(graph)
    d["_of_gm"] = GraphModule(name, prefix, module)
    d["_of_children"] = {}
    return p


class ProxyModule(Proxy):
    """A module as seen from a Graph; see the module docstring."""

    # -- what the proxy stands for -----------------------------------------------------------------
    def to(self, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            if args[0] is Module:
                return self._of_origin
            if args[0] is GraphModule:
                return self._of_gm
        self._of_origin.to(*args, **kwargs)
        return self

    def _child(self, name: str, module: Module) -> "ProxyModule":
        cache = self.__dict__["_of_children"]
        p = cache.get(name)
        if p is None or p._of_origin is not module:
            p = make_proxy(module, name, self._of_gm.path + ".", self._of_graph())
            cache[name] = p
        return p

    def _state(self, t):
        """A parameter or buffer as code inside the graph sees it: lazy while tracing."""
        if t is None:
            return None
        b = job_builder.current_builder()
        return b.variable(t) if b is not None else t

    # -- attribute access ------------------------------------------------------------------------
    def __getattr__(self, name: str):
        if name.startswith("_of_"):
            raise AttributeError(name)
        origin = self.__dict__["_of_origin"]
        od = origin.__dict__
        if name == "_modules":
            return OrderedDict((k, None if m is None else self._child(k, m))
                               for k, m in od["_modules"].items())
        if name in ("_parameters", "_buffers"):
            return OrderedDict((k, self._state(t)) for k, t in od[name].items())
        mods = od.get("_modules")
        if mods is not None and name in mods:
            m = mods[name]
            return None if m is None else self._child(name, m)
        for store in ("_parameters", "_buffers"):
            s = od.get(store)
            if s is not None and name in s:
                return self._state(s[name])
        return getattr(origin, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.__dict__["_of_origin"], name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self.__dict__["_of_origin"], name)

    # -- calling ---------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        origin = self._of_origin
        gm = self._of_gm
        tracing = job_builder.current_builder() is not None
        scope.push(gm.name)
        _calls.modules.append(origin)
        try:
            with job_builder.checkpoint_scope(gm.path, gm.activation_checkpointing):
                if tracing:
                    gm.ins = _shapes(args, kwargs)
                pre_hooks = origin._forward_pre_hooks
                if pre_hooks:
                    args, kwargs = origin._run_pre_hooks(args, kwargs)
                forward = origin.__dict__.get("forward")
                if forward is not None:  # an instance-level override
                    result = forward(*args, **kwargs)
                else:
                    result = type(origin).forward(self, *args, **kwargs)
                if origin._forward_hooks:
                    result = origin._run_hooks(args, kwargs, result)
                if tracing:
                    gm.outs = _shapes((result,), {})
        finally:
            _calls.modules.pop()
            scope.pop()
        return result

    def __repr__(self) -> str:
        return f"(MODULE:{self._of_gm.path}:{self._of_origin!r})"

    def __dir__(self):
        return sorted(set(dir(type(self))) | set(dir(self._of_origin)))


def _shapes(args: tuple, kwargs: dict) -> list:
    found = []

    def walk(v):
        if isinstance(v, Tensor):
            found.append((tuple(v._shape), v.dtype.name))
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(args)
    walk(kwargs)
    return found
