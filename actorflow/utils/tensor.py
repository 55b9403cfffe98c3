"""``actorflow.utils.tensor``: exchanging tensors with PyTorch; PyTorch is imported only
when ``to_torch`` is called, never at actorflow's import."""
from __future__ import annotations

import warnings

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


def to_torch(flow_tensor: Tensor):
    """A PyTorch CPU tensor sharing memory with the local tensor ``flow_tensor`` (through
    NumPy; bfloat16 through its bits). A global tensor gives a copy of its logical values, with
    a warning, as in OneFlow. PyTorch must be installed (imported here, not before)."""
    if not isinstance(flow_tensor, Tensor):
        raise TypeError(f"to_torch: expected an actorflow Tensor, got "
                        f"{type(flow_tensor).__name__}")
    try:
        import torch
    except ImportError as e:
        raise ImportError("to_torch: PyTorch is not installed (pip install torch)") from e
    if flow_tensor.is_global:
        warnings.warn("to_torch: received a global tensor; returning a PyTorch CPU tensor "
                      "that is a copy of its logical values", stacklevel=2)
        array = np.array(flow_tensor.numpy())
    else:
        array = flow_tensor.detach().numpy()
    if any(s < 0 for s in array.strides):  # PyTorch tensors have no negative strides
        array = np.ascontiguousarray(array)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


__all__ = ["from_torch", "to_torch"]
