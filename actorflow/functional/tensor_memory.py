"""Where a tensor's memory lives, as the Tensor API of PyTorch/OneFlow asks it: ``pin_memory``,
``is_pinned``, ``get_device``, ``offload``, ``load`` and ``is_offloaded``.

actorflow has one kind of device, the CPU, so these answer for host memory. Pinned
(page-locked) memory exists to speed copies to a GPU: there is none, so ``is_pinned()`` is
False and ``pin_memory()`` raises, as PyTorch does on a machine without an accelerator.
OneFlow's ``offload()`` moves a GPU tensor's data to host memory and ``load()`` moves it back;
for a CPU tensor OneFlow only warns that there is nothing to move, and so does actorflow
(``is_offloaded()`` stays False).
"""
from __future__ import annotations

import warnings

from actorflow.tensor import Tensor, register_tensor_methods


def pin_memory(self: Tensor) -> Tensor:
    """Copy into pinned memory: raises RuntimeError, there is no accelerator to pin it for."""
    raise RuntimeError(f"pin_memory: pinned (page-locked) memory needs a CUDA or other "
                       f"accelerator device, and there is none (actorflow runs on the CPU); "
                       f"tensor of shape {tuple(self.shape)}")


def is_pinned(self: Tensor, device=None) -> bool:
    """Whether the tensor is in pinned memory: always False without an accelerator."""
    return False


def get_device(self: Tensor) -> int:
    """The CUDA device index holding the tensor; -1 for a CPU tensor (every tensor here), as in
    PyTorch."""
    return -1


def offload(self: Tensor) -> None:
    """Move a device tensor's data to host memory (OneFlow). The tensor is already in host
    memory, so, as OneFlow does for a CPU tensor, this warns and changes nothing."""
    warnings.warn("offload: only a non-CPU tensor can be offloaded; this one is already in "
                  "host memory", stacklevel=2)


def load(self: Tensor) -> None:
    """Move offloaded data back to the device (OneFlow). A CPU tensor is never offloaded, so,
    as OneFlow does, this warns and changes nothing."""
    warnings.warn("load: only a non-CPU tensor can be loaded back to its device; this one "
                  "lives in host memory", stacklevel=2)


def is_offloaded(self: Tensor) -> bool:
    """Whether ``offload()`` moved the data off its device: never for a CPU tensor."""
    return False


register_tensor_methods({"pin_memory": pin_memory, "is_pinned": is_pinned,
                         "get_device": get_device, "offload": offload, "load": load,
                         "is_offloaded": is_offloaded})

__all__: list = []
