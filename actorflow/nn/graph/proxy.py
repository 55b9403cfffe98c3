"""Proxies: how a Graph sees the modules, parameters and buffers assigned to it.

``graph.model = model`` wraps ``model`` (and, as they are reached, its submodules) in a
``ProxyModule``. A proxy is an instance of a class derived from both ``ProxyModule`` and the
module's own class, so ``isinstance(proxy, nn.Linear)`` holds and the class's methods and
properties run with ``self`` being the proxy; every attribute it does not have is read from (and
written to) the original module, so eager and graph share one model (and two graphs may share
one module). Children come back as proxies (also through ``_modules``, so Sequential, ModuleList
- slicing included - and ModuleDict work). Parameters and buffers read through a proxy are lazy
tensors (variable ops) inside ``build`` and ``ProxyTensor``s outside it.

Calling a proxy inside ``build`` runs the module's forward (or an instance-level ``forward``
override) with the module's full path (``model.layers.0``) as the op scope, so op names and
errors name the module. ``proxy.to(nn.Module)`` returns the original module and
``proxy.to(GraphModule)`` its per-graph options (name, ``set_stage``,
``activation_checkpointing``); ``tensor_proxy.to(Tensor)`` / ``to(GraphTensor)`` likewise.
"""
from __future__ import annotations

from collections import OrderedDict

from actorflow import scope
from actorflow.dispatch.lazy import current_tracer
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


class Proxy:
    """Base of the objects a Graph puts in front of its modules and tensors
    (``flow.nn.graph.Proxy``)."""


class _Named:
    """The name of a module or tensor in a Graph and its dotted prefix."""

    _name: str
    _prefix: str

    @property
    def name(self) -> str:
        return self._name

    @property
    def name_prefix(self) -> str:
        return self._prefix

    @property
    def path(self) -> str:
        return self._prefix + self._name


class GraphModule(_Named):
    """Graph-only options and facts of one module in a Graph (``proxy.to(GraphModule)``)."""

    def __init__(self, name: str, prefix: str, module: Module):
        self._name = name
        self._prefix = prefix
        self._type = type(module).__name__
        self._ckpt = False
        self.stage_id = None
        self.stage_placement = None
        self.ins: list = []   # (shape, dtype) of the inputs of the last traced call
        self.outs: list = []
        self.calls = 0        # calls in the last trace

    def set_stage(self, stage_id: int, placement=None) -> None:
        """Record the pipeline stage of this module, as OneFlow's API does; it shows in
        ``scope_util.current_scope()`` and the graph's printout. With ``placement``, each
        global input of the module's calls in build is moved there first
        (``to_global(placement=...)``, keeping its sbp): the send/recv between stages of a
        distributed graph (``dispatch/lazy_move.py``)."""
        if not isinstance(stage_id, int) or isinstance(stage_id, bool) or stage_id < 0:
            raise ValueError(f"set_stage: stage_id must be an int >= 0, got {stage_id!r}")
        self.stage_id = stage_id
        self.stage_placement = placement

    @property
    def activation_checkpointing(self) -> bool:
        """Recompute this module's forward during backward instead of keeping activations."""
        return self._ckpt

    @activation_checkpointing.setter
    def activation_checkpointing(self, value: bool) -> None:
        self._ckpt = bool(value)

    def __repr__(self) -> str:
        return (f"GraphModule(name={self.path!r}, type={self._type}, "
                f"activation_checkpointing={self._ckpt}, stage_id={self.stage_id})")


def _to_stage(pl, args: tuple, kwargs: dict):
    """``args``/``kwargs`` with each global lazy tensor (also inside lists and tuples) moved
    to placement ``pl`` (a module's pipeline stage, ``GraphModule.set_stage``)."""
    from actorflow.dispatch.lazy_global import is_lazy_global

    def move(v):
        if isinstance(v, (list, tuple)):
            return type(v)(move(x) for x in v)
        if is_lazy_global(v) and v.placement != pl:
            return v.to_global(placement=pl)
        return v

    return move(tuple(args)), {k: move(v) for k, v in kwargs.items()}


class GraphTensor(_Named):
    """Graph-only facts of one parameter or buffer (``tensor_proxy.to(GraphTensor)``)."""

    def __init__(self, name: str, prefix: str, kind: str):
        self._name = name
        self._prefix = prefix
        self._type = kind  # "PARAMETER" or "BUFFER"

    @property
    def type(self) -> str:
        return self._type

    def __repr__(self) -> str:
        return f"GraphTensor(name={self.path!r}, type={self._type})"


class ProxyTensor(Proxy):
    """A parameter or buffer read through a proxy outside ``build``. ``to(Tensor)`` returns
    the tensor itself; other attributes (``shape``, ``numpy()``...) are the tensor's."""

    def __init__(self, origin: Tensor, name: str, prefix: str):
        if isinstance(origin, Proxy):
            raise TypeError("ProxyTensor: origin is already a proxy")
        self.__dict__["_of_origin"] = origin
        kind = "PARAMETER" if isinstance(origin, Parameter) else "BUFFER"
        self.__dict__["_of_gt"] = GraphTensor(name, prefix, kind)

    def to(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], type):
            if issubclass(args[0], GraphTensor):
                return self._of_gt
            if issubclass(args[0], Tensor):
                return self._of_origin
        return self._of_origin.to(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_of_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_of_origin"], name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._of_origin, name, value)

    def __repr__(self) -> str:
        t = self._of_origin
        return (f"({self._of_gt.type}:{self._of_gt.path}:tensor(..., size={tuple(t.shape)}, "
                f"dtype={t.dtype}, requires_grad={t.requires_grad}))")


_proxy_classes: dict = {}


def _proxy_class(cls: type) -> type:
    pc = _proxy_classes.get(cls)
    if pc is None:
        pc = type(cls.__name__, (ProxyModule, cls), {"__module__": cls.__module__,
                                                     "__qualname__": cls.__qualname__,
                                                     "_of_base": cls})
        _proxy_classes[cls] = pc
    return pc


def _dead_graph():
    return None


def make_proxy(module: Module, name: str, prefix: str, graph_ref) -> "ProxyModule":
    """A proxy of ``module`` registered as ``prefix + name`` in the graph ``graph_ref()``
    returns (a weak reference)."""
    if isinstance(module, Proxy):
        raise TypeError("make_proxy: the module is already a proxy")
    p = object.__new__(_proxy_class(type(module)))
    _init_proxy(p, module, name, prefix, graph_ref)
    return p


def _init_proxy(p, module: Module, name: str, prefix: str, graph_ref) -> None:
    d = p.__dict__
    d["_of_origin"] = module
    d["_of_graph"] = graph_ref
    d["_of_gm"] = GraphModule(name, prefix, module)
    d["_of_children"] = {}
    d["_of_tensors"] = {}


def unwrap(value):
    """``value`` with proxies replaced by what they stand for, and the lazy tensors of
    parameters and buffers by the eager tensors (in nested tuples, lists and dicts)."""
    if isinstance(value, (ProxyModule, ProxyTensor)):
        return value.__dict__["_of_origin"]
    if isinstance(value, Tensor):
        b = current_tracer()
        if b is not None and value.is_lazy:
            eager = b.eager_of(value)
            if eager is not None:
                return eager
        return value
    t = type(value)
    if t in (list, tuple):
        return t(unwrap(v) for v in value)
    if t in (dict, OrderedDict):
        return t((k, unwrap(v)) for k, v in value.items())
    return value


def _proxies_in(value, found: list) -> list:
    if isinstance(value, ProxyModule):
        found.append(value)
    elif type(value) in (list, tuple):
        for v in value:
            _proxies_in(v, found)
    elif type(value) in (dict, OrderedDict):
        for v in value.values():
            _proxies_in(v, found)
    return found


def _parent_path(value) -> str:
    """The module path the first proxy, tensor proxy or traced parameter in ``value`` lives
    in (``m.layers`` for ``m.layers.1``), or ""."""
    stack = [value]
    b = current_tracer()
    while stack:
        v = stack.pop(0)
        if isinstance(v, ProxyModule):
            return v._of_gm.name_prefix.rstrip(".")
        if isinstance(v, ProxyTensor):
            return v._of_gt.name_prefix.rstrip(".")
        if isinstance(v, Tensor):
            eager = unwrap(v)
            entry = b.state_names.get(id(eager)) if b is not None else None
            if entry is not None and entry[2] is eager:
                return entry[0].rpartition(".")[0]
        elif type(v) in (list, tuple):
            stack.extend(v)
        elif type(v) in (dict, OrderedDict):
            stack.extend(v.values())
    return ""


class ProxyModule(Proxy):
    """A module as seen from a Graph; see the module docstring."""

    _of_base: type = Module

    def __init__(self, *args, **kwargs):
        # Only reached when code builds a new container from a proxy, e.g. ModuleList slicing
        # (``type(self)(...)``): build the real module from the unwrapped arguments and proxy
        # it, reusing the proxies of the children passed in so they keep their paths.
        origin = type(self)._of_base(*unwrap(args), **unwrap(kwargs))
        given = _proxies_in((args, kwargs), [])
        parent = _parent_path((args, kwargs))
        prefix, _, name = parent.rpartition(".") if parent else ("", "", "")
        graph_ref = given[0].__dict__["_of_graph"] if given else _dead_graph
        _init_proxy(self, origin, name or type(origin).__name__,
                    prefix + "." if prefix else "", graph_ref)
        by_id = {id(p._of_origin): p for p in given}
        cache = self.__dict__["_of_children"]
        for key, m in origin.__dict__["_modules"].items():
            if m is not None and id(m) in by_id:
                cache[key] = by_id[id(m)]

    # -- what the proxy stands for -----------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(nn.Module)``: the original module; ``to(GraphModule)``: its graph options;
        anything else moves the original module (like ``Module.to``) and returns the proxy."""
        if len(args) == 1 and not kwargs and isinstance(args[0], type):
            if issubclass(args[0], GraphModule):
                return self._of_gm
            if args[0] is Module or issubclass(args[0], Module) and \
                    isinstance(self._of_origin, args[0]):
                return self._of_origin
        self._of_origin.to(*args, **kwargs)
        return self

    def _child(self, name: str, module: Module) -> "ProxyModule":
        cache = self.__dict__["_of_children"]
        p = cache.get(name)
        if p is None or p.__dict__["_of_origin"] is not module:
            p = make_proxy(module, name, self._of_gm.path + ".", self.__dict__["_of_graph"])
            cache[name] = p
        return p

    def _state(self, name: str, t):
        """A parameter or buffer as code sees it through the proxy: a lazy tensor while
        tracing, else a ProxyTensor."""
        if t is None:
            return None
        b = current_tracer()
        if b is not None:
            return t if t.is_lazy else b.variable(t)
        cache = self.__dict__["_of_tensors"]
        p = cache.get(name)
        if p is None or p.__dict__["_of_origin"] is not t:
            p = ProxyTensor(t, name, self._of_gm.path + ".")
            cache[name] = p
        return p

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
            if current_tracer() is None:
                return od[name]  # outside build: the real state (parameters(), state_dict())
            return OrderedDict((k, self._state(k, t)) for k, t in od[name].items())
        mods = od.get("_modules")
        if mods is not None and name in mods:
            m = mods[name]
            return None if m is None else self._child(name, m)
        for store in ("_parameters", "_buffers"):
            s = od.get(store)
            if s is not None and name in s:
                return self._state(name, s[name])
        try:
            return getattr(origin, name)
        except AttributeError:
            gm = self.__dict__["_of_gm"]
            raise AttributeError(f"'{gm._type}' module '{gm.path}' in nn.Graph has no "
                                 f"attribute '{name}'") from None

    def __setattr__(self, name: str, value) -> None:
        setattr(self.__dict__["_of_origin"], name, unwrap(value))

    def __delattr__(self, name: str) -> None:
        delattr(self.__dict__["_of_origin"], name)

    # -- calling ---------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        origin = self.__dict__["_of_origin"]
        if current_tracer() is None:
            return origin(*args, **kwargs)  # eager use outside build: the module itself
        gm = self.__dict__["_of_gm"]
        if gm.stage_placement is not None:
            args, kwargs = _to_stage(gm.stage_placement, args, kwargs)
        with scope.graph_module_scope(gm.path, origin, gm):
            ins = _shapes(args, kwargs)
            if origin._forward_pre_hooks:
                args, kwargs = origin._run_pre_hooks(args, kwargs)
            forward = origin.__dict__.get("forward")
            if forward is not None:  # an instance-level override
                result = forward(*args, **kwargs)
            else:
                result = type(origin).forward(self, *args, **kwargs)
            if origin._forward_hooks:
                result = origin._run_hooks(args, kwargs, result)
            if gm.calls == 0:
                gm.ins, gm.outs = ins, _shapes((result,), {})
            gm.calls += 1
        return result

    def __repr__(self) -> str:
        from actorflow.nn.graph.show import proxy_repr

        return proxy_repr(self)

    def __dir__(self):
        return sorted(set(dir(type(self))) | set(dir(self._of_origin)))


def iter_proxies(proxy: "ProxyModule"):
    """``proxy`` and every descendant proxy, depth first."""
    yield proxy
    for child in proxy._modules.values():
        if child is not None:
            yield from iter_proxies(child)


def _shapes(args: tuple, kwargs: dict) -> list:
    found = []

    def walk(v):
        if isinstance(v, Tensor):
            found.append((tuple(v._shape), v.dtype))
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(args)
    walk(kwargs)
    return found
