"""Functional API of the graph-structure ops: ``depend``."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops.registry import get
from actorflow.tensor import Tensor

_depend = get("depend")


def depend(input: Tensor, depend) -> Tensor:
    """``input``, computed after ``depend`` (a tensor or a list of tensors) in a graph.

    Inside ``nn.Graph.build`` this adds a ``depend`` op, so ops consuming the result run after
    the ops producing ``depend``; eagerly ops already run in program order and ``input`` itself
    is returned."""
    if not isinstance(input, Tensor):
        raise TypeError(f"depend: input must be a Tensor, got {type(input).__name__}")
    deps = [depend] if isinstance(depend, Tensor) else list(depend) \
        if isinstance(depend, (list, tuple)) else None
    if not deps or not all(isinstance(d, Tensor) for d in deps):
        raise TypeError(f"depend: depend must be a Tensor or a non-empty list of Tensors, got "
                        f"{depend!r}")
    if not input.is_lazy and not any(d.is_lazy for d in deps):
        return input
    return apply(_depend, [input, *deps], {})[0]


__all__ = ["depend"]
