"""``view_as_real`` and ``view_as_complex`` (ops in ``ops/complex_views.py``)."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.ops import registry
from actorflow.tensor import Tensor

_AS_REAL = registry.get("view_as_real")
_AS_COMPLEX = registry.get("view_as_complex")


def view_as_real(input: Tensor) -> Tensor:
    """A complex tensor (*) as a real one (*, 2): real and imaginary parts. A copy (PyTorch
    returns a view; see ``ops/complex_views.py``)."""
    return apply(_AS_REAL, [input], {})[0]


def view_as_complex(input: Tensor) -> Tensor:
    """A real float32/float64 tensor (*, 2) as a complex one (*). A copy (PyTorch returns a
    view; see ``ops/complex_views.py``)."""
    return apply(_AS_COMPLEX, [input], {})[0]


__all__ = ["view_as_real", "view_as_complex"]
