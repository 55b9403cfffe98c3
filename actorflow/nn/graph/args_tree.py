"""A graph call's nested arguments as a flat list of tensors plus a structure to rebuild them,
and the signature the compile cache keys on.

Containers are exact ``tuple``, ``list``, ``dict`` and ``OrderedDict`` values and namedtuples;
leaves are tensors or constants (None, bool, int, float, complex, str, bytes, dtypes, devices,
enums, slices, Ellipsis and tuples of constants such as ``Size``). Constants are part of the
structure, so a different constant is a different signature (the build is traced again with
it). Any other value raises a TypeError naming where it is, e.g. ``y[1]['k']``: a graph would
otherwise bake a mutable object into the Job.
"""
from __future__ import annotations

import enum
from collections import OrderedDict

from actorflow.framework.device import device
from actorflow.framework.dtype import dtype
from actorflow.tensor import Tensor

_CONST_TYPES = (type(None), bool, int, float, complex, str, bytes, dtype, device, enum.Enum,
                slice, type(Ellipsis))


class GraphArgumentError(TypeError):
    """A graph was called with, or returned, a value it can't take."""


def _is_const(v) -> bool:
    if isinstance(v, _CONST_TYPES):
        return True
    if isinstance(v, tuple) and not hasattr(v, "_fields") and type(v) is not tuple:
        return all(_is_const(x) for x in v)  # e.g. Size
    return False


def flatten(value, root: str = "") -> tuple:
    """``(structure, tensors)``: ``tensors`` lists every Tensor of ``value`` depth first;
    ``structure`` is a hashable description with tensors replaced by their position. Raises
    GraphArgumentError for a value that is neither a container, a tensor nor a constant (the
    error names its path from ``root``)."""
    tensors: list = []

    def walk(v):
        tv = type(v)
        if isinstance(v, Tensor):
            tensors.append(v)
            return ("T", len(tensors) - 1)
        if tv is tuple:
            return ("tuple", tuple(walk(x) for x in v))
        if tv is list:
            return ("list", tuple(walk(x) for x in v))
        if tv is dict or tv is OrderedDict:
            return ("dict" if tv is dict else "odict",
                    tuple((k, walk(x)) for k, x in v.items()))
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # namedtuple
            return ("namedtuple", tv, tuple(walk(x) for x in v))
        if _is_const(v):
            return ("value", v)
        raise _BadLeaf(v)

    try:
        return walk(value), tensors
    except _BadLeaf as bad:
        path = find_path(value, bad.value, root)
        raise GraphArgumentError(_bad_leaf_message(path, bad.value)) from None


class _BadLeaf(Exception):
    def __init__(self, value):
        super().__init__()
        self.value = value


def _bad_leaf_message(path: str, v) -> str:
    kind = type(v).__name__
    hint = ""
    if isinstance(v, (dict, list, tuple)):
        hint = (f" ({kind} is a subclass of {type(v).__mro__[1].__name__}: convert it to a "
                f"plain dict, list or tuple)")
    elif hasattr(v, "__array__"):
        hint = " (wrap arrays with actorflow.tensor(...))"
    return (f"nn.Graph: {path} has type {kind}{hint}; graph inputs and outputs may be Tensors, "
            f"constants (None, numbers, strings, dtypes, devices) and tuples, lists and dicts "
            f"of them")


def find_path(value, target, path: str = "") -> str:
    """The path of the first occurrence of object ``target`` in ``value``."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if v is target:
            return p or "the value"
        if isinstance(v, dict):
            stack.extend((x, f"{p}[{k!r}]") for k, x in reversed(list(v.items())))
        elif isinstance(v, (tuple, list)):
            stack.extend((x, f"{p}[{i}]") for i, x in reversed(list(enumerate(v))))
    return path or "the value"


def unflatten(structure, leaves: list):
    """Rebuild a value from ``flatten``'s structure with ``leaves[i]`` for tensor i."""
    kind = structure[0]
    if kind == "T":
        return leaves[structure[1]]
    if kind == "value":
        return structure[1]
    if kind == "tuple":
        return tuple(unflatten(s, leaves) for s in structure[1])
    if kind == "list":
        return [unflatten(s, leaves) for s in structure[1]]
    if kind == "dict":
        return {k: unflatten(s, leaves) for k, s in structure[1]}
    if kind == "odict":
        return OrderedDict((k, unflatten(s, leaves)) for k, s in structure[1])
    if kind == "namedtuple":
        return structure[1](*(unflatten(s, leaves) for s in structure[2]))
    raise ValueError(f"bad structure {structure!r}")


def iter_leaves(structure, root: str = ""):
    """Yield ``(path, leaf)`` for every leaf of ``structure`` in order: a leaf is
    ``("T", index)`` for a tensor or ``("value", v)`` for a plain value."""
    kind = structure[0]
    if kind in ("T", "value"):
        yield root, structure
    elif kind in ("tuple", "list"):
        for i, c in enumerate(structure[1]):
            yield from iter_leaves(c, f"{root}[{i}]")
    elif kind in ("dict", "odict"):
        for k, c in structure[1]:
            yield from iter_leaves(c, f"{root}[{k!r}]")
    elif kind == "namedtuple":
        for f, c in zip(structure[1]._fields, structure[2]):
            yield from iter_leaves(c, f"{root}.{f}")


def leaf_paths(structure, root: str = "") -> list:
    """The path of each tensor of ``structure`` in order (``x``, ``y[1]['k']``...)."""
    paths = {leaf[1]: p for p, leaf in iter_leaves(structure, root) if leaf[0] == "T"}
    return [paths[i] for i in sorted(paths)]


def call_structure(structure, names: list, var_args: str | None) -> tuple:
    """Split the structure of ``(args, kwargs)`` into ``[(argument name, structure)]`` using
    the names of build's positional parameters (extra positional arguments are
    ``{var_args}[i]``)."""
    (_, args), (_, kwargs) = structure[1]
    out = []
    for i, s in enumerate(args):
        name = names[i] if i < len(names) else f"{var_args or 'args'}[{i - len(names)}]"
        out.append((name, s))
    out.extend((k, s) for k, s in kwargs)
    return out


def signature(structure, tensors: list) -> tuple:
    """What must match for a compiled graph to be reused: the structure (with its constants)
    and every tensor's shape, dtype, device (a global tensor's placement and sbp: each rank's
    Job holds its shards) and requires_grad."""
    return (structure, tuple((t._shape, t.dtype.name, _where(t), t.requires_grad)
                             for t in tensors))


def _where(t) -> str:
    if t.is_global:
        h = t._h
        pl = h.placement  # (an n-d placement shows its nested ranks: its hierarchy counts)
        ranks = ','.join(map(str, pl.flat_ranks)) if len(pl.hierarchy) == 1 else pl.ranks.tolist()
        return f"{pl.type}:{ranks} {','.join(str(s.attr()) for s in h.sbp)}"
    return str(t.device)


def describe_difference(old: tuple, new: tuple, old_named: list | None = None,
                        new_named: list | None = None, names: list | None = None) -> str:
    """A short sentence saying how signature ``new`` differs from ``old``. ``old_named`` /
    ``new_named`` are ``call_structure`` results (to name arguments), ``names`` the tensor
    paths of ``new``."""
    (s_old, t_old), (s_new, t_new) = old, new
    if s_old != s_new:
        if old_named is None or new_named is None:
            return f"the arguments changed: {_structure_diff(s_old, s_new)}"
        a, b = dict(old_named), dict(new_named)
        if list(a) != list(b):
            return f"the arguments were ({', '.join(a)}), now ({', '.join(b)})"
        for k in a:
            if a[k] != b[k]:
                return f"argument {_structure_diff(a[k], b[k], k)}"
    diffs = []
    for i, (x, y) in enumerate(zip(t_old, t_new)):
        label = names[i] if names and i < len(names) else f"tensor {i}"
        for what, u, v in zip(("shape", "dtype", "device", "requires_grad"), x, y):
            if u != v:
                diffs.append(f"{label}: {what} {_fmt(u)} -> {_fmt(v)}")
    return "; ".join(diffs) or "nothing (same signature)"


def _fmt(x) -> str:
    return str(tuple(x)) if isinstance(x, tuple) else str(x)


def _structure_diff(a, b, path: str = "") -> str:
    """The first place where two structures differ."""
    if a == b:
        return "none"
    if a[0] != b[0]:
        return f"{path or 'value'} was {_short(a)}, now {_short(b)}"
    kind = a[0]
    if kind in ("tuple", "list", "namedtuple"):
        ca, cb = a[-1], b[-1]
        if len(ca) != len(cb):
            return f"{path or 'value'} had {len(ca)} items, now {len(cb)}"
        for i, (x, y) in enumerate(zip(ca, cb)):
            if x != y:
                return _structure_diff(x, y, f"{path}[{i}]")
    if kind in ("dict", "odict"):
        ka, kb = [k for k, _ in a[1]], [k for k, _ in b[1]]
        if ka != kb:
            return f"{path or 'value'} had keys {ka}, now {kb}"
        for (k, x), (_, y) in zip(a[1], b[1]):
            if x != y:
                return _structure_diff(x, y, f"{path}[{k!r}]")
    return f"{path or 'value'} was {_short(a)}, now {_short(b)}"


def _short(s) -> str:
    if s[0] == "T":
        return "a tensor"
    if s[0] == "value":
        text = repr(s[1])
    else:
        text = s[0]
    return text if len(text) < 60 else text[:57] + "..."
