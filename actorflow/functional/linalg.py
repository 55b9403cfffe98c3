"""Linear algebra functional API (matmul, ...) and Tensor methods."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional._base import as_tensor_like
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_matmul = registry.get("matmul")


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product with NumPy's rules for 1-d and batched (broadcast) operands."""
    attrs = {"transpose_a": transpose_a, "transpose_b": transpose_b}
    return apply(_matmul, [as_tensor_like(a), as_tensor_like(b)], attrs)[0]


def _rmatmul(self, other):
    return matmul(other, self)


register_tensor_methods({"matmul": matmul, "rmatmul": _rmatmul})

__all__ = ["matmul"]
