"""``nn.Module``: the base class of layers and models.

A module keeps its state in three ordered dicts, maintained by ``__setattr__``:
``_parameters`` (``Parameter``), ``_buffers`` (tensors that are state but not trained, such as
batch-norm running statistics) and ``_modules`` (child modules). ``__call__`` runs the forward
pre-hooks, ``forward`` and the forward hooks with the module's path pushed on
``actorflow.scope``, so an op that fails names the module it ran in. ``RemovableHandle`` and the
backward hooks are in ``nn/module_hooks.py``, the printing helpers in ``nn/module_repr.py``.
"""
from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

from actorflow import scope
from actorflow.autograd import no_grad
from actorflow.dispatch.global_tensor import from_full
from actorflow.dispatch.lazy import current_tracer
from actorflow.framework import dtype as dt
from actorflow.framework.device import as_device
from actorflow.functional.creation import empty
from actorflow.nn import module_hooks
from actorflow.nn.module_hooks import RemovableHandle, _add_hook
from actorflow.nn.module_repr import _format_repr, _indent
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor, bump_state_generation

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base class for all neural-network modules (``actorflow.nn.Module``)."""

    training: bool

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = set()

    def forward(self, *args, **kwargs):
        """The computation; every subclass defines it (call the module, not ``forward``)."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    # -- calling ---------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        tracer = current_tracer()
        if tracer is not None:
            tracer.note_module_call(self)
        stack = scope.state.modules
        name = self._scope_name(stack[-1] if stack else None)
        scope.push(name)
        stack.append(self)
        try:
            if self._forward_pre_hooks:
                args, kwargs = self._run_pre_hooks(args, kwargs)
            bw_hooks = self.__dict__.get("_backward_hooks")
            if bw_hooks:
                bw_state, args = module_hooks.wrap_inputs(self, list(bw_hooks.values()), args)
            result = self.forward(*args, **kwargs)
            if self._forward_hooks:
                result = self._run_hooks(args, kwargs, result)
            if bw_hooks:
                result = module_hooks.wrap_outputs(bw_state, result)
        finally:
            stack.pop()
            scope.pop()
        return result

    def _run_pre_hooks(self, args: tuple, kwargs: dict):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook registered with_kwargs=True must "
                                           "return None or a tuple (args, kwargs)")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        return args, kwargs

    def _run_hooks(self, args: tuple, kwargs: dict, result):
        for hid, hook in list(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, result)
            else:
                res = hook(self, args, result)
            if res is not None:
                result = res
        return result

    def _scope_name(self, caller: "Module | None") -> str:
        """The name this call adds to the scope path: the class name for a call from outside
        any module, else this module's path inside the calling module (``blocks.0``)."""
        if caller is None:
            return type(self).__name__
        cached = self.__dict__.get("_scope_cache")
        if cached is not None and cached[0]() is caller:
            return cached[1]
        name = next((k for k, m in caller._modules.items() if m is self), None)
        if name is None:
            name = next((k for k, m in caller.named_modules(remove_duplicate=False)
                         if m is self), None)
        if name is None:  # called by a module that does not own it
            name = self.__dict__.get("_scope_attr_name") or type(self).__name__
        self.__dict__["_scope_cache"] = (weakref.ref(caller), name)
        return name

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; it may return new args (a tuple, or a
        single value). With ``with_kwargs``: ``hook(module, args, kwargs) -> (args, kwargs)``."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        _add_hook(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; a returned value replaces the
        output. With ``with_kwargs``: ``hook(module, args, kwargs, output)``."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs)
        _add_hook(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        return handle

    def register_full_backward_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs once the gradients of a call's tensor
        inputs are known; it may return replacement ``grad_input``."""
        hooks = self.__dict__.setdefault("_backward_hooks", OrderedDict())
        handle = RemovableHandle(hooks, set())
        hooks[handle.id] = hook
        return handle

    register_backward_hook = register_full_backward_hook

    def _register_state_dict_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after this module's
        ``state_dict`` entries are collected; a returned dict replaces them."""
        hooks = self.__dict__.setdefault("_state_dict_hooks", OrderedDict())
        handle = RemovableHandle(hooks, set())
        hooks[handle.id] = hook
        return handle

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before this module's ``state_dict`` entries
        are collected (PyTorch's API); returns a handle whose ``remove()`` unregisters it."""
        hooks = self.__dict__.setdefault("_state_dict_pre_hooks", OrderedDict())
        handle = RemovableHandle(hooks, set())
        hooks[handle.id] = hook
        return handle

    # -- attribute bookkeeping -------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, (Tensor, Module)) or value is None:
            bump_state_generation()  # a graph that bound the old state checks again
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _discard(d, name, "_buffers", "_modules")
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(actorflow.nn.Parameter or None expected)")
            self.register_parameter(name, None)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _discard(d, name, "_parameters", "_buffers")
            self._non_persistent_buffers_set.discard(name)
            self._set_child(name, value)
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (actorflow.nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(actorflow.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        bump_state_generation()
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def _set_child(self, name: str, module: "Module | None") -> None:
        self._modules[name] = module
        bump_state_generation()
        if module is not None:
            module.__dict__["_scope_attr_name"] = name

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under ``name``."""
        _check_name(self, name, "parameter", "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (actorflow.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"cannot assign non-leaf tensor to parameter '{name}': parameters "
                             f"must be created explicitly (use .detach() or Parameter(...))")
        self._parameters[name] = param
        bump_state_generation()

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: module state that is not a parameter. Persistent buffers are part of
        the ``state_dict``."""
        _check_name(self, name, "buffer", "_buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (actorflow.Tensor or None required)")
        self._buffers[name] = tensor
        bump_state_generation()
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module under ``name`` (same as assigning the attribute)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name(self, name, "module", "_modules")
        self._set_child(name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at dotted path ``target`` (``""`` is this module)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            sub = mod._modules.get(item)
            if sub is None:
                raise AttributeError(f"{mod._get_name()} has no submodule `{item}` "
                                     f"(looking up '{target}')")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters or mod._parameters[name] is None:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    # -- iteration -------------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple]:
        """``(path, module)`` for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            yield from child.named_modules(memo, prefix + ("." if prefix else "") + name,
                                           remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and every descendant, each once."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple]:
        """``(name, child)`` for the direct children, each once."""
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator["Module"]:
        """The direct children, each once."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple]:
        """``(path, parameter)`` pairs; a shared parameter appears once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter (of descendants too, unless ``recurse=False``), each once."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple]:
        """``(path, buffer)`` pairs; a shared buffer appears once."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every buffer (of descendants too, unless ``recurse=False``), each once."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- state dict ------------------------------------------------------------------------------
    # entries other than parameters and buffers that a class's _save_to_state_dict writes and
    # its _load_from_state_dict reads (one_embedding's snapshot name)
    _state_dict_extra_keys: tuple = ()

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # the tensors themselves, as OneFlow (PyTorch detaches unless keep_vars)
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b

    def state_dict(self, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name: the tensors themselves, as in
        OneFlow (``keep_vars`` is accepted for PyTorch code and changes nothing)."""
        if destination is None:
            destination = OrderedDict()
        for hook in self.__dict__.get("_state_dict_pre_hooks", {}).values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination, prefix + name + ".", keep_vars)
        for hook in self.__dict__.get("_state_dict_hooks", {}).values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, missing_keys: list,
                              error_msgs: list) -> None:
        """Copy this module's own entries (not its children's) from ``state_dict``."""
        local = itertools.chain(self._parameters.items(),
                                ((k, v) for k, v in self._buffers.items()
                                 if k not in self._non_persistent_buffers_set))
        for name, target in local:
            if target is None:
                continue
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                try:
                    from actorflow.functional.creation import tensor as _tensor
                    value = _tensor(value)
                except (TypeError, ValueError):
                    error_msgs.append(f'While copying the parameter named "{key}", expected a '
                                      f'tensor, got {type(value).__name__}.')
                    continue
            if tuple(value._shape) != tuple(target._shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(value._shape)} from checkpoint, the shape in current "
                                  f"model is {tuple(target._shape)}.")
                continue
            if target.is_global and value.is_local:
                # a logical (loaded) value: each rank keeps its shard of the target's layout
                value = _global_like(value, target)
            elif target.is_local and value.is_global:  # its logical values (a collective)
                value = Tensor._wrap(value.numpy(), value.dtype)
            with no_grad():
                target.copy_(value)

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict`` into this module (in place).

        With ``strict`` a missing or unexpected key is an error; a shape mismatch always is.
        Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        errors: list = []
        for prefix, mod in self.named_modules(remove_duplicate=False):
            mod._load_from_state_dict(state_dict, prefix + "." if prefix else "", missing,
                                      errors)
        unexpected = [k for k in state_dict if not self._owns_key(k)]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" +
                               "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    def _owns_key(self, key: str) -> bool:
        mod_path, _, name = key.rpartition(".")
        try:
            mod = self.get_submodule(mod_path)
        except AttributeError:
            return False
        return name in mod._parameters or (name in mod._buffers and
                                           name not in mod._non_persistent_buffers_set) \
            or name in type(mod)._state_dict_extra_keys

    # -- modes and conversions -------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and all descendants."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode: ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set ``requires_grad`` on every parameter."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to None, or to zeros in place)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Replace every parameter's and buffer's values with ``fn(values)``, keeping the
        Parameter objects (and their gradients, converted the same way)."""
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    p.data = fn(p.detach())
                    if p.grad is not None:
                        p._grad = fn(p.grad.detach())
                for name, b in m._buffers.items():
                    if b is not None:
                        m._buffers[name] = fn(b)
        bump_state_generation()
        return self

    def to_empty(self, *, device, recurse: bool = True) -> "Module":
        """Give every parameter and buffer new, uninitialised memory on ``device`` (the same
        shapes and dtypes): how a module built on the meta device gets storage."""
        if not recurse:
            raise NotImplementedError("to_empty(recurse=False) is not supported")
        return self._apply(lambda t: empty(tuple(t._shape), dtype=t.dtype, device=device))

    def to_global(self, placement=None, sbp=None) -> "Module":
        """Make every parameter and buffer a global tensor with ``placement`` and ``sbp`` (the
        same Parameter objects; see ``Tensor.to_global``), as OneFlow's ``Module.to_global``."""
        return self._apply(lambda t: t.to_global(placement=placement, sbp=sbp))

    def to_local(self) -> "Module":
        """Make every global parameter and buffer this rank's local shard (``to_local``)."""
        return self._apply(lambda t: t.to_local() if t.is_global else t)

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every descendant (children first) and then on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(tensor)``: converts
        floating-point parameters and buffers in place."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, dt.dtype):
                dtype = a
            elif isinstance(a, str) or hasattr(a, "type"):
                device = a
            else:
                raise TypeError(f"to(): cannot interpret argument {a!r}")
        if device is not None:
            dev = as_device(device)
            if any(t.device != dev for t in list(self.parameters()) + list(self.buffers())):
                self._apply(lambda t: t.to(device=dev))  # to or from the meta device
        if dtype is None:
            return self
        d = dt.as_dtype(dtype)
        if not d.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got {d}")
        return self._apply(lambda t: t.to(d) if t.dtype.is_floating_point else t)

    def float(self) -> "Module":
        """Floating-point parameters and buffers to float32."""
        return self.to(dt.float32)

    def double(self) -> "Module":
        """Floating-point parameters and buffers to float64."""
        return self.to(dt.float64)

    def half(self) -> "Module":
        """Floating-point parameters and buffers to float16."""
        return self.to(dt.float16)

    def bfloat16(self) -> "Module":
        """Floating-point parameters and buffers to bfloat16."""
        return self.to(dt.bfloat16)

    def cpu(self) -> "Module":
        """The module (actorflow computes on the CPU)."""
        return self

    def cuda(self, device=None) -> "Module":
        """Raises: actorflow has no CUDA device."""
        as_device("cuda" if device is None else device)
        return self

    # -- printing --------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """Extra text inside this module's repr (its constructor arguments)."""
        return ""

    def __repr__(self) -> str:
        head = self.extra_repr().split("\n") if self.extra_repr() else []
        children = [f"({key}): {_indent(repr(mod), 2)}" for key, mod in self._modules.items()]
        return _format_repr(self._get_name(), head, children)


def _global_like(value: Tensor, target: Tensor) -> Tensor:
    """Local ``value`` (the logical tensor, the same on every rank) laid out like global
    ``target``: its placement and sbp; no transfer."""
    return from_full(value.to(target.dtype), target.placement, target.sbp)


def _discard(d: dict, name: str, *stores: str) -> None:
    d.pop(name, None)
    for s in stores:
        d[s].pop(name, None)


def _check_name(module: Module, name: str, kind: str, store: str) -> None:
    if "_parameters" not in module.__dict__:
        raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
    if hasattr(module, name) and name not in module.__dict__[store]:
        raise KeyError(f"attribute '{name}' already exists")
