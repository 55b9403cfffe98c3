"""Nested arguments (tuples, lists, dicts of tensors and plain values) as a flat list of leaves
plus a structure to rebuild them, and the signature a graph's compile cache keys on."""
from __future__ import annotations

from actorflow.tensor import Tensor

_LEAF_TYPES = (type(None), bool, int, float, str, complex, bytes)


def flatten(value, path: str = "") -> tuple:
    """``(structure, leaves)``: ``leaves`` lists ``(path, tensor)`` for every Tensor in
    ``value``; ``structure`` is a hashable description with tensors replaced by their position.
    Raises TypeError naming the path of a value that is neither."""
    leaves: list = []

    def walk(v, p):
        if isinstance(v, Tensor):
            leaves.append((p, v))
            return ("T", len(leaves) - 1)
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # namedtuple
            return ("namedtuple", type(v), tuple(walk(x, f"{p}.{f}")
                                                for f, x in zip(v._fields, v)))
        if isinstance(v, tuple):
            return ("tuple", tuple(walk(x, f"{p}[{i}]") for i, x in enumerate(v)))
        if isinstance(v, list):
            return ("list", tuple(walk(x, f"{p}[{i}]") for i, x in enumerate(v)))
        if isinstance(v, dict):
            return ("dict", tuple((k, walk(x, f"{p}[{k!r}]")) for k, x in v.items()))
        if isinstance(v, _LEAF_TYPES):
            return ("value", v)
        raise TypeError(f"nn.Graph: argument {p} has type {type(v).__name__}; graph inputs "
                        f"and outputs may be Tensors, None, numbers, strings and tuples, lists "
                        f"and dicts of them")

    return walk(value, path), leaves


def unflatten(structure, leaves: list):
    """Rebuild a value from ``flatten``'s structure with ``leaves[i]`` for tensor i."""
    kind = structure[0]
    if kind == "T":
        return leaves[structure[1]]
    if kind == "value":
        return structure[1]
    if kind == "namedtuple":
        return structure[1](*(unflatten(s, leaves) for s in structure[2]))
    if kind == "tuple":
        return tuple(unflatten(s, leaves) for s in structure[1])
    if kind == "list":
        return [unflatten(s, leaves) for s in structure[1]]
    if kind == "dict":
        return {k: unflatten(s, leaves) for k, s in structure[1]}
    raise ValueError(f"bad structure {structure!r}")


def signature(structure, leaves: list) -> tuple:
    """What must match for a compiled graph to be reused: the structure (with non-tensor
    values) and every tensor's shape, dtype, device and requires_grad."""
    return (structure, tuple((tuple(t._shape), t.dtype.name, str(t.device), t.requires_grad)
                             for _, t in leaves))


def describe_difference(old: tuple, new: tuple) -> str:
    """A sentence saying how signature ``new`` differs from ``old``."""
    (s_old, t_old), (s_new, t_new) = old, new
    if s_old != s_new:
        return f"the argument structure changed from {_short(s_old)} to {_short(s_new)}"
    diffs = []
    for i, (a, b) in enumerate(zip(t_old, t_new)):
        for what, x, y in zip(("shape", "dtype", "device", "requires_grad"), a, b):
            if x != y:
                diffs.append(f"tensor {i} {what} {x} -> {y}")
    return "; ".join(diffs) or "nothing (same signature)"


def _short(s) -> str:
    text = repr(s)
    return text if len(text) < 200 else text[:197] + "..."
