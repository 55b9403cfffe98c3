"""Reading checkpoints written by ``torch.save`` (its zip format), without PyTorch and without
running code from the file.

A ``torch.save`` file is a zip archive: ``<name>/data.pkl`` (a pickle of the saved object, whose
tensors refer to storages by key) and ``<name>/data/<key>`` (each storage's raw bytes). The
pickle is read by an unpickler that resolves only the few globals a checkpoint needs - the
tensor and parameter rebuild functions, the typed storage classes, ``OrderedDict`` - and
refuses every other one, naming it; so a file can't make ``load`` import or call anything else.
Tensors come back as actorflow tensors (copies, laid out from the storage's offset, sizes and
strides); parameters as plain tensors, as ``actorflow.load`` gives them.
"""
from __future__ import annotations

import collections
import io
import pickle
import zipfile

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor

ZIP_MAGIC = b"PK\x03\x04"

_STORAGES = {"FloatStorage": dt.float32, "DoubleStorage": dt.float64,
             "HalfStorage": dt.float16, "BFloat16Storage": dt.bfloat16,
             "LongStorage": dt.int64, "IntStorage": dt.int32, "ShortStorage": dt.int16,
             "CharStorage": dt.int8, "ByteStorage": dt.uint8, "BoolStorage": dt.bool_,
             "ComplexFloatStorage": dt.complex64, "ComplexDoubleStorage": dt.complex128}


class _StorageType:
    """Stands for ``torch.<X>Storage`` in the pickle: only its dtype matters."""

    def __init__(self, dtype: dt.dtype):
        self.dtype = dtype


def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, hooks=None,
                    metadata=None) -> Tensor:
    data, d = storage
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    need = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if offset < 0 or need > data.size or any(s < 0 for s in stride):
        raise ValueError(f"load: a tensor of size {size}, stride {stride} and offset {offset} "
                         f"does not fit its storage of {data.size} elements")
    item = data.itemsize
    view = np.lib.stride_tricks.as_strided(data[offset:] if data.size else data, size,
                                           tuple(s * item for s in stride), writeable=False)
    t = Tensor._wrap(np.array(view, dtype=d.np, copy=True), d)
    if requires_grad and d.is_differentiable:
        t.requires_grad = True
    return t


def _rebuild_parameter(data, requires_grad=True, hooks=None, *extra) -> Tensor:
    if requires_grad and data.dtype.is_differentiable:
        data.requires_grad = True
    return data


_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch", "Size"): tuple,
}


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str, where: str):
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix, self.where = archive, prefix, where
        self.storages: dict = {}
        self.little = True

    def find_class(self, module: str, name: str):
        if module == "torch" and name in _STORAGES:
            return _StorageType(_STORAGES[name])
        fn = _GLOBALS.get((module, name))
        if fn is None:
            raise ValueError(f"load: {self.where} is a PyTorch file that needs {module}.{name}; "
                             "actorflow reads only tensors, numbers, strings and containers "
                             "from PyTorch files (no other Python objects)")
        return fn

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage" \
                or not isinstance(pid[1], _StorageType):
            raise ValueError(f"load: {self.where}: unsupported storage reference {pid!r}")
        _, kind, key, _location, numel = pid
        if key not in self.storages:
            try:
                raw = self.archive.read(f"{self.prefix}data/{key}")
            except KeyError:
                raise ValueError(f"load: {self.where}: storage {key!r} is missing") from None
            npd = np.dtype(kind.dtype.np)
            npd = npd.newbyteorder("<" if self.little else ">") if npd.itemsize > 1 else npd
            if len(raw) < int(numel) * npd.itemsize:
                raise ValueError(f"load: {self.where}: storage {key!r} is truncated")
            arr = np.frombuffer(raw, dtype=npd, count=int(numel))
            self.storages[key] = (arr.astype(np.dtype(kind.dtype.np)), kind.dtype)
        return self.storages[key]


def load_torch_zip(data: bytes, where: str):
    """The object a ``torch.save`` zip file holds, with actorflow tensors."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        pkl = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(pkl) != 1:
            raise ValueError(f"load: {where} is a zip file but not a PyTorch checkpoint "
                             "(no single data.pkl)")
        prefix = pkl[0][:-len("data.pkl")]
        reader = _Unpickler(archive.read(pkl[0]), archive, prefix, where)
        if f"{prefix}byteorder" in archive.namelist():
            reader.little = archive.read(f"{prefix}byteorder").strip() != b"big"
        return reader.load()
    except (zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as e:
        raise ValueError(f"load: {where} is not a valid PyTorch checkpoint: {e}") from e
