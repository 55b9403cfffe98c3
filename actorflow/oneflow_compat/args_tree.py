"""``ArgsTree``: a nested argument (tuples, lists, dicts of tensors and plain values) seen as a
tree, with optional names for its nodes (``oneflow.framework.args_tree``, which OneFlow's graph
tests use; actorflow's own graphs flatten arguments with ``actorflow.nn.graph.args_tree``).

Only exact ``tuple``, ``list``, ``dict`` and ``OrderedDict`` values are containers; anything
else (tensors, None, numbers, strings, instances of other classes, subclasses of the
containers included) is a leaf. With ``gen_name=True`` every node is wrapped in a ``NamedArg``
that knows its prefix (the path of positions from the root, ``"root.1.0"``), its name (the dict
key, else its index in depth-first order) and its value.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterator

from actorflow.tensor import Tensor

_CONTAINERS = (tuple, list, dict, OrderedDict)


def _is_container(value) -> bool:
    return type(value) in _CONTAINERS


def _children(value):
    if type(value) in (dict, OrderedDict):
        return list(value.values())
    return list(value)


def _rebuild(value, items):
    """A container of ``value``'s type holding ``items`` (pairs for dicts)."""
    return type(value)(items)


class NamedArg:
    """One node of an ``ArgsTree`` with ``gen_name``: its prefix, name, index and value."""

    def __init__(self, prefix: str = "", name: str | None = None, global_index: int = 0,
                 tensor_type: type = Tensor):
        self._prefix = prefix
        self._name = str(global_index) if name is None else str(name)
        self._global_index = global_index
        self._tensor_type = tensor_type
        self._has_value = False
        self._value = None

    def prefix(self) -> str:
        return self._prefix

    def name(self) -> str:
        return self._name

    def global_index(self) -> int:
        return self._global_index

    def set_value(self, value) -> None:
        if isinstance(value, NamedArg):
            raise TypeError("NamedArg.set_value: the value can't itself be a NamedArg")
        self._value = value
        self._has_value = True

    def value(self):
        if not self._has_value:
            raise RuntimeError(f"NamedArg {self._prefix}_{self._name} has no value yet")
        return self._value

    def is_leaf(self) -> bool:
        return not _is_container(self.value())

    def kind(self) -> str:
        """TUPLE, LIST, DICT, TENSOR, NONE or OPAQUE."""
        v = self._value
        t = type(v)
        if t is tuple:
            return "TUPLE"
        if t is list:
            return "LIST"
        if t in (dict, OrderedDict):
            return "DICT"
        if isinstance(v, self._tensor_type):
            return "TENSOR"
        return "NONE" if v is None else "OPAQUE"

    def __repr__(self) -> str:
        v = self._value
        if isinstance(v, self._tensor_type):
            shown = f"tensor({tuple(v.shape)}, {v.dtype})"
        else:
            shown = repr(v)
        return (f"(name: {self._name}, idx: {self._global_index}, type: {self.kind()}, "
                f"value: {shown})")


class ArgsTree:
    """A nested argument as a tree; see the module docstring.

    ``iter_nodes()`` walks it depth first (containers before their children);
    ``iter_named_nodes()`` (with ``gen_name``) yields ``(prefix_name, NamedArg)``;
    ``map_leaf(fn)`` rebuilds the structure with every leaf replaced by ``fn(leaf)`` (the
    ``NamedArg`` with ``gen_name``, else the value); ``map_tuple_leaf(fn)`` does the same on
    the raw values of a tuple or list argument.
    """

    def __init__(self, io_args, gen_name: bool = False, root_prefix: str = "",
                 root_name: str | None = None, tensor_type: type = Tensor):
        self._io_args = io_args
        self._gen_name = bool(gen_name)
        self._tensor_type = tensor_type
        self._next_index = 0
        self._named = self._name_tree(io_args, root_prefix, root_name) if gen_name else None

    def gen_name(self) -> bool:
        return self._gen_name

    def _name_tree(self, value, prefix: str, name) -> NamedArg:
        node = NamedArg(prefix, name, self._next_index, self._tensor_type)
        self._next_index += 1
        if type(value) in (dict, OrderedDict):
            node.set_value(_rebuild(value, [
                (k, self._name_tree(v, f"{prefix}.{i}" if prefix else str(i), k))
                for i, (k, v) in enumerate(value.items())]))
        elif _is_container(value):
            node.set_value(_rebuild(value, [
                self._name_tree(v, f"{prefix}.{i}" if prefix else str(i), None)
                for i, v in enumerate(value)]))
        else:
            node.set_value(value)
        return node

    def iter_nodes(self) -> Iterator:
        """Every node, depth first; NamedArgs with ``gen_name``, else raw values."""
        stack = [self._named if self._gen_name else self._io_args]
        while stack:
            node = stack.pop()
            yield node
            value = node.value() if isinstance(node, NamedArg) else node
            if _is_container(value):
                stack.extend(reversed(_children(value)))

    def iter_named_nodes(self) -> Iterator:
        """``(prefix + "_" + name, NamedArg)`` for every node (needs ``gen_name``)."""
        if not self._gen_name:
            raise RuntimeError("ArgsTree.iter_named_nodes needs an ArgsTree made with "
                               "gen_name=True")
        for node in self.iter_nodes():
            yield f"{node.prefix()}_{node.name()}", node

    def map_leaf(self, fn: Callable):
        """The argument with each leaf replaced by ``fn(leaf)``."""
        if fn is None:
            raise TypeError("ArgsTree.map_leaf: the map function can't be None")
        return self._map(self._named if self._gen_name else self._io_args, fn)

    def map_tuple_leaf(self, fn: Callable):
        """For a tuple or list argument: the same container with ``fn`` applied to the raw
        value of every leaf (nested containers are rebuilt)."""
        if fn is None:
            raise TypeError("ArgsTree.map_tuple_leaf: the map function can't be None")
        if not isinstance(self._io_args, (tuple, list)):
            raise TypeError(f"ArgsTree.map_tuple_leaf: the argument must be a tuple or a list, "
                            f"got {type(self._io_args).__name__}")
        return self._map(self._io_args, fn)

    def _map(self, value, fn: Callable):
        if isinstance(value, NamedArg):
            return fn(value) if value.is_leaf() else self._map(value.value(), fn)
        if type(value) in (dict, OrderedDict):
            return _rebuild(value, [(k, self._map(v, fn)) for k, v in value.items()])
        if _is_container(value):
            return _rebuild(value, [self._map(v, fn) for v in value])
        return fn(value)

    def __repr__(self) -> str:
        return repr(self._named) if self._named is not None else f"ArgsTree({self._io_args!r})"


__all__ = ["ArgsTree", "NamedArg"]
