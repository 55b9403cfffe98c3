"""Global tensors in the functional API: ``to_global``, ``to_local`` and the Tensor
properties ``placement``, ``sbp``, ``is_local`` (see ``actorflow.dispatch.global_tensor``)."""
from __future__ import annotations

from actorflow.dispatch import global_tensor as gt
from actorflow.tensor import Tensor, register_tensor_methods


def to_global(x: Tensor, placement=None, sbp=None) -> Tensor:
    """``x`` as a global tensor on ``placement`` laid out as ``sbp`` (differentiable).

    From a local tensor: ``x`` is this rank's shard (broadcast: the placement's first rank's
    values are used; split: the ranks' tensors, of any sizes, are concatenated; partial_sum:
    they are summed); every rank calls it. From a global tensor: boxing to ``sbp`` on the
    same placement (None keeps the current one), or a move to another ``placement`` (the
    ranks may differ; the gradient moves back).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"to_global: expected a Tensor, got {type(x).__name__}")
    if x.is_lazy:
        raise TypeError("to_global: global tensors can't be made while a Graph traces (the "
                        "distributed graph is not built yet)")
    if gt.is_global(x):
        if placement is not None and placement != x.placement:
            if sbp is None and len(placement.hierarchy) != len(x.sbp):
                raise ValueError(f"to_global: moving a global tensor from {x.placement} to "
                                 f"{placement}, of another hierarchy, needs sbp")
            return gt.move(x, placement, x.sbp if sbp is None else sbp)
        return gt.box(x, x.sbp if sbp is None else sbp)
    if placement is None or sbp is None:
        raise ValueError("to_global: a local tensor needs both placement and sbp")
    return gt.from_local(x, placement, sbp)


def to_local(x: Tensor) -> Tensor:
    """This rank's shard of global ``x`` (an alias, differentiable); a local ``x`` itself."""
    if not gt.is_global(x):
        return x
    return gt.to_local(x)


def _placement(self):
    """The placement of a global tensor (None for a local one)."""
    return self._h.placement if gt.is_global(self) else None


def _sbp(self):
    """The SBP tuple of a global tensor (None for a local one)."""
    return self._h.sbp if gt.is_global(self) else None


def _is_local(self) -> bool:
    return not gt.is_global(self)


register_tensor_methods({"to_global": to_global, "to_local": to_local,
                         "placement": property(_placement), "sbp": property(_sbp),
                         "is_local": property(_is_local)})

__all__ = ["to_global", "to_local"]
