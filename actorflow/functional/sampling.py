"""Random draws from tensors of probabilities: ``multinomial`` (op in
``actorflow/ops/multinomial.py``) and the ``Tensor.bernoulli`` / ``Tensor.multinomial``
methods; and ``flow.new_ones``, OneFlow's function form of ``Tensor.new_ones``."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.creation import bernoulli
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

__all__ = ["multinomial", "new_ones"]

_MULTINOMIAL = registry.get("multinomial")


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None) -> Tensor:
    """``num_samples`` category indices (int64) per row of ``input``, (K,) or (N, K)
    non-negative weights (not necessarily summing to one), drawn with or without
    ``replacement``; from ``generator`` or the global one (``flow.manual_seed``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: expected a Tensor, got {type(input).__name__}")
    attrs = {"num_samples": int(num_samples), "replacement": bool(replacement)}
    if generator is not None:
        attrs["seed"] = generator.next_seed()
    return apply(_MULTINOMIAL, [input], attrs)[0]


def _bernoulli_method(self: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 draws (of this tensor's dtype), 1 with probability ``self`` (or ``p``)."""
    return bernoulli(self, p, generator=generator)


def new_ones(x: Tensor, size=None, dtype=None, device=None, placement=None, sbp=None,
             requires_grad: bool = False) -> Tensor:
    """A tensor of ones of ``size`` (default: ``x``'s shape) with ``x``'s dtype unless
    ``dtype`` (and, for a global ``x``, its placement and sbp unless given)."""
    shape = tuple(x._shape) if size is None else size
    if isinstance(shape, int):
        shape = (shape,)
    return x.new_ones(*shape, dtype=dtype, device=device, requires_grad=requires_grad,
                      placement=placement, sbp=sbp)


register_tensor_methods({"multinomial": multinomial, "bernoulli": _bernoulli_method})
