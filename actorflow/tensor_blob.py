"""Storage handles of a Tensor (split from ``actorflow/tensor.py``, which re-exports them):
``EagerBlob`` (a NumPy array and its VM dependency record), ``MetaBlob`` (a blob of a Job:
shape and dtype only) and ``DeviceMetaBlob`` (a tensor on the ``meta`` device).
"""
from __future__ import annotations

import numpy as np

from actorflow.vm.instruction import Storage
from actorflow.vm.scheduler import sync_read, sync_write


class EagerBlob:
    """Eager storage handle: the NumPy array that holds a tensor's values, and the VM's
    dependency record (``storage``) of the memory it views (shared by views of one base).

    ``array`` waits for every pending VM access to the memory (safe to read and to write);
    ``raw`` is the array without waiting (for metadata: shape, strides, flags).
    """

    __slots__ = ("raw", "storage")

    def __init__(self, array: np.ndarray, storage: Storage | None = None):
        self.raw = array
        self.storage = storage if storage is not None else Storage()

    @property
    def array(self) -> np.ndarray:
        sync_write(self.storage)
        return self.raw

    @array.setter
    def array(self, value: np.ndarray) -> None:
        sync_write(self.storage)
        self.raw = value

    def get(self) -> np.ndarray:
        """The array, once its last writer has run (a read sync point)."""
        s = self.storage
        w = s.writer
        if (w is not None and (not w.done or w.error is not None)) or s.failed is not None:
            sync_read(s)
        return self.raw

    def shared_array(self) -> np.ndarray:
        """The array handed to NumPy code (``Tensor.numpy()``): after every pending access,
        and from now on every instruction on this memory completes before its op returns
        (``Storage.shared``), since the VM can't see what NumPy code does with it."""
        s = self.storage
        sync_write(s)
        s.shared = True
        return self.raw


class MetaBlob:
    """Handle of a tensor known by shape and dtype only: blob ``name`` of a Job. It has no
    value; inference, verification and tracing work on such tensors."""

    __slots__ = ("name",)
    is_lazy = True

    def __init__(self, name: str):
        self.name = name

    def get(self):
        raise RuntimeError(f"tensor {self.name} is a blob of a Job: it has a shape and a dtype "
                           f"but no value")

    def describe(self) -> str:
        return f"blob {self.name!r}"


class DeviceMetaBlob:
    """Handle of a tensor on the ``meta`` device: a shape and a dtype, no data. Ops on such
    tensors run shape/dtype inference only (``dispatch/meta.py``)."""

    __slots__ = ()
    is_lazy = False

    def get(self):
        raise RuntimeError("a tensor on device 'meta' has no data: only its shape and dtype "
                           "exist (make it on the cpu device, or Module.to_empty(device='cpu'))")

    def describe(self) -> str:
        return "..., device='meta'"
