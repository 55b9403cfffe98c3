"""The SBP value type, its codecs and its layout math: the one home of SBP below every layer
that uses it (``flow.sbp`` re-exports the public part, see ``actorflow.framework.sbp``).

An ``SbpParallel`` says how a logical tensor maps onto the ranks of one placement axis:
``split(dim)`` (rank i holds the i-th of the ``numpy.array_split`` pieces along ``dim``),
``broadcast`` (every rank holds all of it), ``partial_sum`` (the logical tensor is the sum of
the ranks' tensors) or ``partial_max`` (their elementwise maximum). A global tensor on an n-D
placement has one per hierarchy axis (an *n-d SBP*, a tuple).

Forms and codecs (one of each):

- the value: ``SbpParallel`` (what users pass and see: ``actorflow.sbp.split(dim=0)``);
- its attr form, plain data for op attrs and signatures (a Job is data, so SBP rules and
  boxing ops speak it): ``("S", d)``, ``("B",)``, ``("P",)``, ``("M",)`` (``S(d)``, ``B``,
  ``P``, ``M``); ``SbpParallel.attr()`` / ``SbpParallel.from_attr``, ``nd_attrs`` /
  ``nd_value`` for n-d SBPs;
- its text form, for a Job's ``global`` tags: ``"S(0)"``, ``"B"``, ``"P"``, ``"M"`` and
  ``"(S(0), B)"`` for an n-d SBP; ``sbp_str`` / ``sbp_attr``, ``nd_sbp_str`` /
  ``nd_sbp_attr``.

Layout math (attr form): ``shard_range`` (a split dim's piece), ``shard_shape`` (one axis),
``nd_shard_shape`` (n-D, nested as OneFlow's: axis 0 lays the tensor out over its groups,
axis 1 each group's part over that group's ranks, and so on), ``coords_of`` (a rank's
position in an n-D placement) and ``group_ranks`` (the ranks along one axis).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework.placement import placement


class SbpLayoutError(ValueError, RuntimeError):
    """A layout that cannot be: a split of a dim the shape lacks. A ValueError, and a
    RuntimeError as the op errors that raised it before."""


class SbpParallel:
    """One SBP: ``split(dim)``, ``broadcast``, ``partial_sum`` or ``partial_max`` (see the
    module docstring)."""

    __slots__ = ("kind", "dim")

    def __init__(self, kind: str, dim: int | None = None):
        self.kind, self.dim = kind, dim

    @property
    def is_split(self) -> bool:
        return self.kind == "S"

    @property
    def is_broadcast(self) -> bool:
        return self.kind == "B"

    @property
    def is_partial_sum(self) -> bool:
        return self.kind == "P"

    @property
    def is_partial_max(self) -> bool:
        return self.kind == "M"

    def __eq__(self, other) -> bool:
        return isinstance(other, SbpParallel) and (self.kind, self.dim) == (other.kind, other.dim)

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.kind, self.dim))

    def __call__(self) -> "SbpParallel":
        """``flow.sbp.broadcast()`` is ``flow.sbp.broadcast``, as OneFlow's tests write it."""
        return self

    def __repr__(self) -> str:
        if self.kind == "S":
            return f"actorflow.sbp.split(dim={self.dim})"
        return {"B": "actorflow.sbp.broadcast", "P": "actorflow.sbp.partial_sum",
                "M": "actorflow.sbp.partial_max"}[self.kind]

    __str__ = __repr__

    def attr(self) -> tuple:
        """A plain value for op attrs: ``("S", dim)``, ``("B",)``, ``("P",)`` or ``("M",)``."""
        return ("S", self.dim) if self.kind == "S" else (self.kind,)

    @staticmethod
    def from_attr(value: tuple) -> "SbpParallel":
        """The SBP an ``attr()`` value stands for."""
        if value[0] == "S":
            return split(value[1])
        return {"B": broadcast, "P": partial_sum, "M": partial_max}[value[0]]


def split(dim: int) -> SbpParallel:
    """``flow.sbp.split(dim)``: rank i holds the i-th piece along ``dim``."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 0:
        raise ValueError(f"sbp.split: dim must be a non-negative int, got {dim!r}")
    return SbpParallel("S", int(dim))


broadcast = SbpParallel("B")
partial_sum = SbpParallel("P")
partial_max = SbpParallel("M")


def as_sbp_tuple(sbp, what: str = "sbp") -> tuple:
    """``sbp`` (one SbpParallel or a list/tuple of them) as a tuple of SbpParallel."""
    items = sbp if isinstance(sbp, (list, tuple)) else [sbp]
    if not items or not all(isinstance(s, SbpParallel) for s in items):
        raise TypeError(f"{what}: expected flow.sbp.split(dim), flow.sbp.broadcast, "
                        f"flow.sbp.partial_sum or flow.sbp.partial_max (or a tuple of them), "
                        f"got {sbp!r}")
    return tuple(items)


# ---- the attr form ------------------------------------------------------------------------------

B, P, M = ("B",), ("P",), ("M",)


def S(dim: int) -> tuple:  # noqa: N802  (reads as the SBP it names)
    """The SBP attr of split(dim)."""
    return ("S", dim)


def nd_attrs(sbp: tuple) -> tuple:
    """An SbpParallel tuple as a tuple of attr tuples."""
    return tuple(s.attr() for s in sbp)


def nd_value(attrs: tuple) -> tuple:
    """An n-d SBP attr tuple as a tuple of SbpParallel."""
    return tuple(SbpParallel.from_attr(a) for a in attrs)


# ---- the text form ------------------------------------------------------------------------------

def sbp_str(attr: tuple) -> str:
    """``"S(0)"``, ``"B"``, ``"P"`` or ``"M"`` for a (1-D) SBP attr tuple."""
    return f"S({attr[1]})" if attr[0] == "S" else attr[0]


def sbp_attr(s: str) -> tuple:
    """Inverse of ``sbp_str``."""
    return ("S", int(s[2:-1])) if s.startswith("S(") else (s,)


def nd_sbp_str(nd: tuple) -> str:
    """An n-d SBP (attr tuples) as text: ``"S(0)"`` on a 1-D placement, ``"(S(0), B)"`` on a
    2-D one."""
    if len(nd) == 1:
        return sbp_str(nd[0])
    return "(" + ", ".join(sbp_str(a) for a in nd) + ")"


def nd_sbp_attr(s: str) -> tuple:
    """Inverse of ``nd_sbp_str``: a tuple of attr tuples, one per hierarchy axis."""
    if s.startswith("("):
        return tuple(sbp_attr(x.strip()) for x in s[1:-1].split(","))
    return (sbp_attr(s),)


# ---- layout math --------------------------------------------------------------------------------

def shard_range(size: int, n: int, i: int) -> tuple:
    """(start, stop) of piece ``i`` of ``n`` of a dim of ``size`` (numpy.array_split's)."""
    q, r = divmod(size, n)
    start = i * q + min(i, r)
    return start, start + q + (1 if i < r else 0)


def shard_shape(shape: tuple, sbp: tuple, n: int, i: int) -> tuple:
    """Rank ``i`` of ``n``'s shard shape of a logical ``shape`` laid out as ``sbp`` (an attr
    tuple). Raises ``SbpLayoutError`` for a split of a dim ``shape`` lacks."""
    if sbp[0] != "S":
        return tuple(shape)
    d = sbp[1]
    if d >= len(shape):
        raise SbpLayoutError(f"split({d}) of a tensor of shape {tuple(shape)}: dim {d} is out "
                             f"of range")
    a, b = shard_range(shape[d], n, i)
    return tuple(shape[:d]) + (b - a,) + tuple(shape[d + 1:])


def nd_shard_shape(shape: tuple, sbp: tuple, hierarchy: tuple, coords: tuple) -> tuple:
    """The shard shape at ``coords`` of a logical ``shape`` laid out as n-d ``sbp``."""
    shape = tuple(shape)
    for s, n, c in zip(sbp, hierarchy, coords):
        shape = shard_shape(shape, s, n, c)
    return shape


def coords_of(pl: placement, rank: int) -> tuple | None:
    """``rank``'s coordinates in ``pl``'s rank array, or None when it is not one of its ranks."""
    idx = pl.index(rank)
    if idx is None or len(pl.hierarchy) == 1:
        return None if idx is None else (idx,)
    return tuple(int(c) for c in np.unravel_index(idx, pl.hierarchy))


def group_ranks(pl: placement, coords: tuple, axis: int) -> tuple:
    """The ranks sharing every coordinate of ``coords`` but ``axis``, in that axis's order."""
    arr = np.array(pl.flat_ranks).reshape(pl.hierarchy)
    at = tuple(slice(None) if k == axis else c for k, c in enumerate(coords))
    return tuple(int(r) for r in arr[at])
