"""Global tensors in the functional API: ``to_global``, ``to_local`` and the Tensor
properties ``placement``, ``sbp``, ``is_local`` (see ``actorflow.dispatch.global_tensor``)."""
from __future__ import annotations

from actorflow.dispatch import global_meta as meta
from actorflow.dispatch import global_tensor as gt
from actorflow.dispatch import lazy_global
from actorflow.framework.sbp_parallel import as_sbp_tuple
from actorflow.functional.elementwise import clone
from actorflow.tensor import Tensor, register_tensor_methods


def to_global(x: Tensor, placement=None, sbp=None, *, grad_sbp=None, check_meta=None,
              copy: bool = False) -> Tensor:
    """``x`` as a global tensor on ``placement`` laid out as ``sbp`` (differentiable).

    From a local tensor: ``x`` is this rank's shard (broadcast: the placement's first rank's
    values are used; split: the ranks' tensors, whose sizes along the split dim must be
    balanced, are concatenated; partial_sum: they are summed); every rank calls it.
    ``check_meta`` (default True here) makes the ranks check that they agree on dtype, shape,
    placement and sbp (a mismatch raises on every rank); False skips that exchange and takes
    every rank's tensor to have this rank's shape. ``copy`` shards a copy of ``x``.

    From a global tensor: boxing to ``sbp`` on the same placement (None keeps the current
    one), or a move to another ``placement`` (the ranks may differ; the gradient moves back);
    ``grad_sbp`` is the sbp its gradient is boxed to in backward (default: ``x``'s, same
    placement only), ``check_meta`` (default False here) checks that the ranks passed the same
    placement and sbp, ``copy`` returns a new tensor even when nothing moves.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"to_global: expected a Tensor, got {type(x).__name__}")
    if lazy_global.is_lazy_global(x):  # inside nn.Graph build: boxing ops into the Job
        if grad_sbp is not None or copy:
            raise NotImplementedError("nn.Graph: to_global(grad_sbp=..., copy=True) is not "
                                      "supported yet inside build()")
        if placement is not None and placement != x.placement:  # a pipeline stage's edge
            from actorflow.dispatch import lazy_move

            return lazy_move.move(x, placement, x.sbp if sbp is None else sbp)
        return lazy_global.box(x, x.sbp if sbp is None else sbp)
    if x.is_lazy:
        raise TypeError("to_global: a local tensor can't be made global inside nn.Graph "
                        "build() yet; make the graph's inputs and parameters global instead")
    if gt.is_global(x):
        if placement is not None and placement != x.placement:
            if grad_sbp is not None:
                raise ValueError(f"to_global: grad_sbp with a move from {x.placement} to "
                                 f"{placement} is not supported (the gradient moves back "
                                 f"laid out as the input)")
            if sbp is None and len(placement.hierarchy) != len(x.sbp):
                raise ValueError(f"to_global: moving a global tensor from {x.placement} to "
                                 f"{placement}, of another hierarchy, needs sbp")
            new = x.sbp if sbp is None else sbp
            if check_meta:
                meta.check_global(placement, as_sbp_tuple(new, "to_global"))
            return gt.move(x, placement, new)
        new = x.sbp if sbp is None else sbp
        if check_meta:
            meta.check_global(x.placement, as_sbp_tuple(new, "to_global"))
        return gt.box(x, new, grad_sbp=grad_sbp, copy=copy)
    if placement is None or sbp is None:
        raise ValueError("to_global: a local tensor needs both placement and sbp")
    if copy:
        x = clone(x)
    return gt.from_local(x, placement, sbp, check_meta=True if check_meta is None
                         else bool(check_meta))


def to_local(x: Tensor, *, copy: bool = False) -> Tensor:
    """This rank's shard of global ``x`` (an alias, differentiable; a copy with ``copy``).
    A local ``x`` raises, as OneFlow's (``flow.utils.global_view.to_local`` leaves local
    tensors as they are)."""
    if lazy_global.is_lazy_global(x):
        raise NotImplementedError("to_local: not supported inside nn.Graph build() yet")
    if not gt.is_global(x):
        raise RuntimeError(f"to_local: Expected global tensor for to_local but got local "
                           f"tensor! (shape {tuple(x.shape)}, {x.dtype})")
    out = gt.to_local(x)
    return clone(out) if copy else out


def local_to_global(x: Tensor, placement=None, sbp=None, *, check_meta: bool = True,
                    copy: bool = False) -> Tensor:
    """OneFlow's ``Tensor.local_to_global``: ``to_global`` of a local tensor (placement and
    sbp both required); a global ``x`` raises."""
    if not isinstance(x, Tensor) or x.is_global or lazy_global.is_lazy_global(x):
        raise RuntimeError("local_to_global: input must be a local tensor")
    if placement is None or sbp is None:
        raise ValueError("local_to_global: converting a local tensor to a global tensor needs "
                         "both placement and sbp")
    return to_global(x, placement, sbp, check_meta=check_meta, copy=copy)


def global_to_global(x: Tensor, placement=None, sbp=None, *, grad_sbp=None,
                     check_meta: bool = False, copy: bool = False) -> Tensor:
    """OneFlow's ``Tensor.global_to_global``: ``to_global`` of a global tensor (None keeps
    its placement or sbp); a local ``x`` raises."""
    if not isinstance(x, Tensor) or not (x.is_global or lazy_global.is_lazy_global(x)):
        raise RuntimeError("global_to_global: input must be a global tensor")
    return to_global(x, placement, sbp, grad_sbp=grad_sbp, check_meta=check_meta, copy=copy)


def _to_consistent(self, *args, **kwargs):
    """Removed from OneFlow (its old name for ``to_global``): raises, as OneFlow does."""
    raise RuntimeError(".to_consistent has been removed, please use .to_global instead")


def _placement(self):
    """The placement of a global tensor; a local one has none (RuntimeError, as OneFlow)."""
    if not self.is_global:
        raise RuntimeError(f"placement: a local tensor (shape {tuple(self._shape)}, on "
                           f"{self.device}) has no placement; only global tensors have one")
    return self._h.placement


def _sbp(self):
    """The SBP tuple of a global tensor; a local one has none (RuntimeError, as OneFlow)."""
    if not self.is_global:
        raise RuntimeError(f"sbp: a local tensor (shape {tuple(self._shape)}, on "
                           f"{self.device}) has no sbp; only global tensors have one")
    return self._h.sbp


def _global_id(self) -> int:
    """OneFlow's ``Tensor.global_id()``: the id of a global tensor, the same on every rank for
    the same tensor (given in creation order: every rank creates its global tensors in the same
    order); a local tensor has none (RuntimeError)."""
    if not self.is_global:
        raise RuntimeError(f"global_id: a local tensor (shape {tuple(self._shape)}) has no "
                           f"global id; only global tensors have one")
    return self._h.global_id


def _is_local(self) -> bool:
    return not self.is_global


register_tensor_methods({"to_global": to_global, "to_local": to_local,
                         "local_to_global": local_to_global,
                         "global_to_global": global_to_global, "to_consistent": _to_consistent,
                         "placement": property(_placement), "sbp": property(_sbp),
                         "global_id": _global_id,
                         "is_local": property(_is_local)})

__all__ = ["to_global", "to_local"]
