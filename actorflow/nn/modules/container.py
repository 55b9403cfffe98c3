"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from __future__ import annotations

import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping

from actorflow.nn.module import Module, _indent, _format_repr
from actorflow.nn.parameter import Parameter
from actorflow.tensor import Tensor


def _index(i, n: int, what: str) -> int:
    i = operator.index(i)
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of range for {what} of length {n}")
    return i % n


class Sequential(Module):
    """Modules called in order, each on the previous one's output.

    ``Sequential(m0, m1, ...)`` names the children ``0, 1, ...``; ``Sequential(OrderedDict)``
    uses the dict's keys.
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules.keys())[_index(idx, len(self), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            for key in keys[idx]:
                del self._modules[key]
        else:
            del self._modules[keys[_index(idx, len(self), "Sequential")]]
        self._renumber()

    def _renumber(self) -> None:
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._set_child(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise TypeError(f"Sequential.insert: expected a Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} is out of range for length {n}")
        items = list(self._modules.values())
        items.insert(index if index >= 0 else index + n, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        """Append each of ``modules``."""
        for m in modules:
            self.append(m)
        return self

    def pop(self, idx: int = -1) -> Module:
        """Remove and return the module at ``idx``."""
        m = self[idx]
        del self[idx]
        return m

    def forward(self, input):
        """Feed ``input`` through the modules in order."""
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children ``0, 1, ...`` (it has no ``forward``)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(self), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(items):
            self._set_child(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        return type(self)(list(self) + list(other))

    def append(self, module: Module) -> "ModuleList":
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Append each of ``modules``."""
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleList.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for m in list(modules):
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.insert: expected a Module, got {type(module).__name__}")
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def pop(self, idx: int = -1) -> Module:
        """Remove and return the module at ``idx``."""
        m = self[idx]
        del self[idx]
        return m

    def __repr__(self) -> str:
        """Like Module's repr, but runs of identical children print once: ``(0-2): 3 x ...``."""
        groups: list = []  # [first_key, last_key, count, repr]
        for key, mod in self._modules.items():
            r = repr(mod)
            if groups and groups[-1][3] == r:
                groups[-1][1] = key
                groups[-1][2] += 1
            else:
                groups.append([key, key, 1, r])
        lines = []
        for first, last, count, r in groups:
            if count == 1:
                lines.append(f"({first}): {_indent(r, 2)}")
            else:
                lines.append(f"({first}-{last}): {count} x {_indent(r, 2)}")
        return _format_repr(self._get_name(), [], lines)


class ModuleDict(Module):
    """An ordered dict of modules, registered as children under their keys."""

    def __init__(self, modules: Mapping | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every entry."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module under ``key``."""
        m = self[key]
        del self[key]
        return m

    def keys(self):
        """The keys, in order."""
        return self._modules.keys()

    def items(self):
        """``(key, value)`` pairs, in order."""
        return self._modules.items()

    def values(self):
        """The values, in order."""
        return self._modules.values()

    def update(self, modules: Mapping | Iterable) -> None:
        """Add ``modules`` (a mapping, or an iterable of ``(key, module)`` pairs)."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict.update: element #{j} should be a (key, module) "
                                 f"pair, got length {len(pair)}")
            self[pair[0]] = pair[1]


def _as_parameter(value: Any) -> Any:
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value, requires_grad=value.dtype.is_floating_point)
    return value


def _param_summary(p: Any, type_name: bool = False) -> str:
    """``Parameter containing: [actorflow.float32 of size 2x3]`` (or the tensor type name)."""
    if isinstance(p, Tensor):
        size = "x".join(str(s) for s in p._shape)
        kind = p.type() if type_name else f"actorflow.{p.dtype.name}"
        return f"Parameter containing: [{kind} of size {size}]"
    return repr(p)


class ParameterList(Module):
    """A list of parameters registered under ``0, 1, ...`` (plain tensors become Parameters)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self), "ParameterList")))

    def __setitem__(self, idx: int, value: Any) -> None:
        setattr(self, str(_index(idx, len(self), "ParameterList")), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values: Iterable) -> "ParameterList":
        return self.extend(values)

    def append(self, value: Any) -> "ParameterList":
        """Add ``value`` (a tensor becomes a Parameter) at the end."""
        n = self._size
        self.__dict__["_size"] = n + 1
        setattr(self, str(n), _as_parameter(value))
        return self

    def extend(self, values: Iterable) -> "ParameterList":
        """Append each of ``values``."""
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({i}): {_param_summary(p)}" for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters registered under their keys."""

    def __init__(self, parameters: Mapping | Iterable | None = None) -> None:
        super().__init__()
        self.__dict__["_keys"] = OrderedDict()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        """The keys, in order."""
        return self._keys.keys()

    def items(self):
        """``(key, value)`` pairs, in order."""
        return [(k, self[k]) for k in self._keys]

    def values(self):
        """The values, in order."""
        return [self[k] for k in self._keys]

    def get(self, key: str, default: Any = None) -> Any:
        """The parameter under ``key``, or ``default``."""
        return self[key] if key in self else default

    def pop(self, key: str) -> Any:
        """Remove and return the parameter under ``key``."""
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        """Remove every entry."""
        for k in list(self._keys):
            del self[k]

    def update(self, parameters: Mapping | Iterable) -> None:
        """Add ``parameters`` (a mapping, or an iterable of ``(key, value)`` pairs). A plain
        dict is added in sorted key order, as in PyTorch."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ParameterDict.update: element #{j} should be a (key, value) "
                                 f"pair, got length {len(pair)}")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_param_summary(v, True)}" for k, v in self.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")
