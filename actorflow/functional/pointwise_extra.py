"""``lerp`` / ``lerp_`` and ``frac`` / ``frac_`` (ops in ``actorflow/ops/pointwise_extra.py``),
the flow-level names of in-place unary ops (``flow.ceil_``, ``flow.floor_``, ``flow.round_``,
``flow.sin_``) and the in-place comparisons ``Tensor.gt_`` / ``ge_`` / ``lt_`` / ``le_`` /
``eq_`` / ``ne_`` (the result, 1 or 0, in the tensor's own dtype)."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional._base import as_tensor_like, is_scalar
from actorflow.functional.activation import ceil_, floor_, round_, sin_
from actorflow.functional.elementwise import binary_fn, unary_fn
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

__all__ = ["lerp", "lerp_", "frac", "frac_", "ceil_", "floor_", "round_", "sin_"]

_LERP = registry.get("lerp")
_SCALAR_LERP = registry.get("scalar_lerp")


def _lerp(start: Tensor, end, weight, out) -> Tensor:
    if not isinstance(start, Tensor):
        raise TypeError(f"lerp: start must be a Tensor, got {type(start).__name__}")
    if not isinstance(end, Tensor):
        end = as_tensor_like(end, start)
    if is_scalar(weight):
        return apply(_SCALAR_LERP, [start, end], {"weight": float(weight)}, out=out)[0]
    if not isinstance(weight, Tensor):
        weight = as_tensor_like(weight, start)
    return apply(_LERP, [start, end, weight], {}, out=out)[0]


def lerp(start: Tensor, end: Tensor, weight) -> Tensor:
    """``start + weight * (end - start)``, broadcasting; ``weight`` a tensor or a number."""
    return _lerp(start, end, weight, None)


def lerp_(start: Tensor, end: Tensor, weight) -> Tensor:
    """In-place ``lerp``: the result is written into ``start``."""
    return _lerp(start, end, weight, [start])


frac, frac_ = unary_fn("frac")
frac.__doc__ = "``x - trunc(x)``: the fractional part, with the sign of ``x``."

_CMP_INPLACE = {name + "_": binary_fn(name)[1] for name in ("gt", "ge", "lt", "le", "eq", "ne")}

register_tensor_methods({"lerp": lerp, "lerp_": lerp_, "frac": frac, "frac_": frac_,
                         **_CMP_INPLACE})
