"""``nn.Parameter``: a leaf tensor that a Module registers as one of its parameters."""
from __future__ import annotations

from actorflow.tensor import Tensor, _init


class Parameter(Tensor):
    """A tensor that is a module parameter: a leaf that requires grad (by default).

    It shares ``data``'s storage, so ``Parameter(t)`` sees in-place changes to ``t``.
    Assigning a Parameter as a Module attribute registers it in ``module._parameters``.
    """

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from actorflow.functional.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor as data, got {type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise RuntimeError(f"Parameter: only floating point tensors can require gradients, "
                               f"got dtype {data.dtype} (pass requires_grad=False)")
        _init(self, data._h, data._shape, data.dtype, data._vc)
        self.requires_grad = bool(requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__
