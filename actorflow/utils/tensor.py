"""``actorflow.utils.tensor``: exchanging tensors with PyTorch without importing it."""
from __future__ import annotations

import numpy as np

from actorflow.functional.creation import from_numpy
from actorflow.tensor import Tensor


def from_torch(torch_tensor) -> Tensor:
    """An actorflow tensor sharing memory with a PyTorch CPU tensor (through NumPy; PyTorch is
    not imported here). A tensor that requires grad is detached first."""
    if not hasattr(torch_tensor, "numpy") or not hasattr(torch_tensor, "device"):
        raise TypeError(f"from_torch: expected a torch.Tensor, got {type(torch_tensor).__name__}")
    if getattr(torch_tensor.device, "type", "cpu") != "cpu":
        raise RuntimeError(f"from_torch: only CPU tensors can be shared, got one on "
                           f"{torch_tensor.device}")
    array = torch_tensor.detach().numpy()
    if not isinstance(array, np.ndarray):
        raise TypeError("from_torch: the tensor's numpy() did not return an array")
    return from_numpy(array)


__all__ = ["from_torch"]
