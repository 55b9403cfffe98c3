"""The user-facing Tensor.

A Tensor is metadata (shape, dtype, autograd links) plus a storage *handle*:
  * eager: ``EagerBlob`` holding a NumPy array (the VM can make it asynchronous),
  * ``MetaBlob``: shape and dtype only, a blob of a Job (``LazyBlob``, its subclass in
    ``actorflow.dispatch.lazy``, is a blob of the Job a Graph is tracing).
The handles are in ``actorflow/tensor_blob.py`` (re-exported here), the printing in
``actorflow/tensor_str.py``. Kernels never see Tensors: the dispatcher hands them arrays
(shape inference and gradient rules do see Tensors).
Most methods (``add``, ``sum``, ``reshape``...) are attached by the functional modules through
``register_tensor_methods``, so each op family keeps its API next to its definition.
"""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.framework.device import CPU, META, as_device, is_meta
from actorflow.tensor_blob import DeviceMetaBlob, EagerBlob, MetaBlob  # noqa: F401 (re-exported)
from actorflow.tensor_str import _format
from actorflow.vm.scheduler import sync_read, sync_write


def meta_tensor(shape: tuple, dtype: dt.dtype) -> "Tensor":
    """A new tensor on the meta device."""
    return Tensor._from_handle(DeviceMetaBlob(), tuple(shape), dtype)


class Size(tuple):
    """A tensor shape (``actorflow.Size``), a tuple of ints."""

    def __repr__(self) -> str:
        return f"actorflow.Size([{', '.join(str(int(d)) for d in self)}])"

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n


class Tensor:
    """A multi-dimensional array with autograd (``actorflow.Tensor``)."""

    __slots__ = ("_h", "_shape", "dtype", "requires_grad", "_grad", "grad_fn", "_out_idx",
                 "_vc", "_hooks", "_retains_grad", "_base", "__weakref__", "__dict__")
    # weak references to the live views made of this tensor with grad mode on (set on a base
    # by ``dispatch/copy_slices.py``, which rebases their histories after in-place writes)
    _views = None

    # -- construction ---------------------------------------------------------------------------
    def __init__(self, *args, dtype=None, device=None, requires_grad: bool = False,
                 placement=None, sbp=None):
        if placement is not None or sbp is not None:  # a global tensor of those values/shape
            if placement is None or sbp is None or device is not None:
                raise ValueError("Tensor: a global tensor needs both placement and sbp (and no "
                                 "device)")
            # dispatch.global_tensor (a layer above) attaches _from_full
            g = Tensor._from_full(Tensor(*args, dtype=dtype), placement, sbp)
            _init(self, g._h, g._shape, g.dtype)
            self.requires_grad = bool(requires_grad)
            return
        meta = is_meta(device)
        if not meta:
            as_device(device)  # a device with no kernels here (cuda) raises, naming it
        data_types = (np.ndarray, list, tuple, Tensor, numbers.Number)
        if len(args) == 1 and isinstance(args[0], data_types) \
                and not isinstance(args[0], Size) \
                and not (isinstance(args[0], int) and not isinstance(args[0], bool)):
            src = args[0]
            if isinstance(src, Tensor):
                src = src._array()
            # Like torch.Tensor / flow.Tensor: data becomes the default float dtype.
            d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
            arr = np.array(src, dtype=d.np)
        else:
            shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, Size)) else args
            shape = tuple(int(s) for s in shape) if args else (0,)  # Tensor(): empty, as torch
            d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
            if meta:  # no data to allocate
                _init(self, DeviceMetaBlob(), shape, d)
                self.requires_grad = bool(requires_grad)
                return
            arr = np.zeros(shape, dtype=d.np)
        _init(self, DeviceMetaBlob() if meta else EagerBlob(arr), arr.shape, d)
        self.requires_grad = bool(requires_grad)

    @classmethod
    def _wrap(cls, array: np.ndarray, dtype: dt.dtype, vc=None, storage=None) -> "Tensor":
        """Fast path: a new eager tensor over ``array`` (no copy). ``storage``: the VM record
        of the memory when ``array`` views another tensor's (pass ``base._h.storage``)."""
        t = object.__new__(cls)
        _init(t, EagerBlob(array, storage), array.shape, dtype, vc)
        return t

    @classmethod
    def _from_handle(cls, handle, shape: tuple, dtype: dt.dtype) -> "Tensor":
        t = object.__new__(cls)
        _init(t, handle, shape, dtype)
        return t

    # -- metadata -------------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._shape)
        return self._shape[_wrap_dim(dim, len(self._shape), "size")]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    def numel(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def device(self):
        return META if type(self._h) is DeviceMetaBlob else CPU

    @property
    def is_meta(self) -> bool:
        """True for a tensor on the meta device (shape and dtype, no data)."""
        return type(self._h) is DeviceMetaBlob

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_lazy(self) -> bool:
        return not isinstance(self._h, EagerBlob) and getattr(self._h, "is_lazy", False)

    @property
    def is_global(self) -> bool:
        return getattr(self._h, "is_global", False)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's storage, outside autograd."""
        return self.detach()

    @data.setter
    def data(self, other: "Tensor") -> None:
        if not isinstance(other, Tensor):
            raise TypeError("data: expected a Tensor")
        self._h, self._shape, self.dtype = other._h, other._shape, other.dtype
        self._vc = other._vc
        _state_generation[0] += 1

    # -- grad -----------------------------------------------------------------------------------
    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad must be a Tensor or None, got {type(value).__name__}")
            if value._shape != self._shape:
                raise RuntimeError(f"grad: assigned grad has shape {tuple(value._shape)}, "
                                   f"but the tensor has shape {tuple(self._shape)}")
        self._grad = value

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_: you can only change requires_grad of leaf tensors; "
                               "use detach() for a non-leaf")
        if requires_grad and not self.dtype.is_differentiable:
            raise RuntimeError(f"requires_grad_: only floating point and complex tensors can "
                               f"require gradients, this one is {self.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    # retain_grad, register_hook and backward run the autograd engine, a layer above: it
    # attaches them (autograd/engine.py)

    # -- values -----------------------------------------------------------------------------------
    def _array(self) -> np.ndarray:
        """The NumPy array with this tensor's values: a VM sync point that waits for the
        instruction producing them (and raises its error, or that of a failed in-place write).
        Read only; to write the memory outside an op, use ``_array_for_write()``."""
        h = self._h
        if type(h) is EagerBlob:
            s = h.storage
            w = s.writer
            if (w is not None and (not w.done or w.error is not None)) or \
                    s.failed is not None:
                sync_read(s)
            return h.raw
        return h.get()

    def _array_for_write(self) -> np.ndarray:
        """The array, after every pending VM read and write of its memory (a sync point);
        safe to write in place."""
        h = self._h
        if type(h) is EagerBlob:
            sync_write(h.storage)
            return h.raw
        return h.get()

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array sharing memory with the tensor (CPU). As in OneFlow,
        this works on tensors that require grad too (the array is outside autograd). A sync
        point: waits for every pending access, so the array may be written. From then on the
        memory is shared with NumPy: every op reading or writing it (or a view of it)
        completes before it returns, so the array and the tensor agree as in PyTorch."""
        h = self._h
        if type(h) is EagerBlob:
            return h.shared_array()
        return h.get()

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(t)``: the shared array (as ``numpy()``), or a copy when ``copy`` is
        True or ``dtype`` differs."""
        if copy or (dtype is not None and np.dtype(dtype) != self.dtype.np):
            return np.array(self._array(), dtype=dtype, copy=True)
        return self.numpy()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"item(): a tensor with {self.numel()} elements cannot be "
                               f"converted to a Python scalar (shape {tuple(self._shape)})")
        return self._array().reshape(()).item()

    def tolist(self):
        return self._array().tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"bool(): the truth value of a tensor with {self.numel()} "
                               f"elements is ambiguous (shape {tuple(self._shape)})")
        return bool(self._array().reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self._shape[0]):
            yield self[i]

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return _format(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.numel() == 1 and spec:
            return format(self.item(), spec)
        return repr(self)

    def __reduce_ex__(self, proto):
        raise TypeError("actorflow tensors are not pickled; use actorflow.save / actorflow.load")

    def __deepcopy__(self, memo):
        """A copy of the values; a leaf keeps ``requires_grad``, the copy of a computed tensor
        is a plain tensor outside the autograd graph (as OneFlow's deepcopy)."""
        import copy
        t = Tensor._wrap(self._array().copy(), self.dtype)
        # a copy of a non-leaf is a new leaf without grad (OneFlow's deepcopy keeps the data
        # only); a leaf keeps requires_grad (PyTorch, and parameters of a copied module)
        t.requires_grad = self.requires_grad and self.grad_fn is None
        if type(self) is not Tensor:
            t.__class__ = type(self)
        if self._grad is not None:
            t._grad = copy.deepcopy(self._grad, memo)
        memo[id(self)] = t
        return t

    # -- conversions ------------------------------------------------------------------------------
    def to(self, *args, **kwargs) -> "Tensor":
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``;
        keywords ``dtype``, ``device``, ``copy``, ``non_blocking``, ``memory_format``."""
        target_dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if memory_format is not None:  # ``functional.tensor_api``: a copy in that layout
            return self.to(*args, **kwargs, dtype=target_dtype, device=dev,
                           copy=copy)._to_memory_format(memory_format)
        if kwargs:
            raise TypeError(f"to(): unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                target_dtype = a.dtype
            elif isinstance(a, dt.dtype) or a in (float, int, bool):
                target_dtype = a
            elif isinstance(a, str) or hasattr(a, "type"):
                dev = a
            else:
                raise TypeError(f"to(): cannot interpret argument {a!r}")
        dev = as_device(dev) if dev is not None else self.device
        if (dev.type == "meta") != self.is_meta:
            if self.is_meta:
                raise NotImplementedError("to(): cannot copy out of a meta tensor: it has no "
                                          f"data (shape {tuple(self._shape)})")
            d = self.dtype if target_dtype is None else dt.as_dtype(target_dtype)
            return meta_tensor(self._shape, d)  # (a copy to the meta device keeps no data)
        if target_dtype is None or dt.as_dtype(target_dtype) is self.dtype:
            return self.clone() if copy else self
        return self.cast(dt.as_dtype(target_dtype))

    def cpu(self) -> "Tensor":
        return self.to("cpu") if self.is_meta else self

    def cuda(self, *a, **k):
        as_device("cuda")

    def type(self, dtype=None):
        """The type name (``"actorflow.FloatTensor"``), or this tensor cast to ``dtype``: a
        dtype, a typed tensor class (``flow.LongTensor``) or its name (``"oneflow.LongTensor"``,
        ``"actorflow.cuda.LongTensor"`` names a device actorflow does not have)."""
        if dtype is None:
            return f"actorflow.{_TYPE_NAMES.get(self.dtype.name, self.dtype.name)}"
        if isinstance(dtype, str):
            *prefix, name = dtype.split(".")
            by_name = {v: k for k, v in _TYPE_NAMES.items()}
            if name not in by_name or len(prefix) > 2:
                raise ValueError(f"type(): invalid tensor type {dtype!r}")
            as_device(prefix[1] if len(prefix) == 2 else None)
            dtype = dt.as_dtype(by_name[name])
        elif isinstance(getattr(dtype, "dtype", None), dt.dtype) and isinstance(dtype, type):
            dtype = dtype.dtype
        return self.to(dtype)

    def float(self) -> "Tensor":
        return self.to(dt.float32)

    def double(self) -> "Tensor":
        return self.to(dt.float64)

    def half(self) -> "Tensor":
        return self.to(dt.float16)

    def bfloat16(self) -> "Tensor":
        return self.to(dt.bfloat16)

    def long(self) -> "Tensor":
        return self.to(dt.int64)

    def int(self) -> "Tensor":
        return self.to(dt.int32)

    def char(self) -> "Tensor":
        return self.to(dt.int8)

    def byte(self) -> "Tensor":
        return self.to(dt.uint8)

    def bool(self) -> "Tensor":
        return self.to(dt.bool_)

    def is_contiguous(self) -> bool:
        h = self._h
        if type(h) is EagerBlob:
            return bool(h.raw.flags.c_contiguous)
        return True

    def stride(self, dim: int | None = None):
        """Strides in elements, like PyTorch (contiguous strides for non-eager tensors)."""
        h = self._h
        if type(h) is EagerBlob and h.raw.ndim:
            strides = tuple(s // h.raw.itemsize for s in h.raw.strides)
        else:
            strides, acc = [], 1
            for s in reversed(self._shape):
                strides.insert(0, acc)
                acc *= max(s, 1)
            strides = tuple(strides)
        if dim is None:
            return strides
        return strides[_wrap_dim(dim, len(self._shape), "stride")]

    def data_ptr(self) -> int:
        h = self._h
        a = h.raw if type(h) is EagerBlob else self._array()
        return a.__array_interface__["data"][0]

    # -- python operators: forwarded to methods attached by the functional modules ---------------
    def __add__(self, o):
        return self.add(o)

    def __radd__(self, o):
        return self.add(o)

    def __iadd__(self, o):
        return self.add_(o)

    def __sub__(self, o):
        return self.sub(o)

    def __rsub__(self, o):
        return self.rsub(o)

    def __isub__(self, o):
        return self.sub_(o)

    def __mul__(self, o):
        return self.mul(o)

    def __rmul__(self, o):
        return self.mul(o)

    def __imul__(self, o):
        return self.mul_(o)

    def __truediv__(self, o):
        return self.div(o)

    def __rtruediv__(self, o):
        return self.rdiv(o)

    def __itruediv__(self, o):
        return self.div_(o)

    def __floordiv__(self, o):
        return self.floor_divide(o)

    def __rfloordiv__(self, o):
        return self.rfloor_divide(o)

    # OneFlow's ``%`` is fmod (sign of the dividend), not remainder: docs/oneflow_tests.md
    def __mod__(self, o):
        return self.fmod(o)

    def __rmod__(self, o):
        return self.rfmod(o)

    def __pow__(self, o):
        return self.pow(o)

    def __rpow__(self, o):
        return self.rpow(o)

    def __matmul__(self, o):
        return self.matmul(o)

    def __rmatmul__(self, o):
        return self.rmatmul(o)

    def __neg__(self):
        return self.neg()

    def __pos__(self):
        return self

    def __abs__(self):
        return self.abs()

    def __invert__(self):
        return self.logical_not() if self.dtype is dt.bool_ else self.bitwise_not()

    def __and__(self, o):
        return self.logical_and(o) if self.dtype is dt.bool_ else self.bitwise_and(o)

    def __or__(self, o):
        return self.logical_or(o) if self.dtype is dt.bool_ else self.bitwise_or(o)

    def __xor__(self, o):
        return self.logical_xor(o) if self.dtype is dt.bool_ else self.bitwise_xor(o)

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __eq__(self, o):
        return self.eq(o)

    def __ne__(self, o):
        return self.ne(o)

    def __lt__(self, o):
        return self.lt(o)

    def __le__(self, o):
        return self.le(o)

    def __gt__(self, o):
        return self.gt(o)

    def __ge__(self, o):
        return self.ge(o)

    def __getitem__(self, index):
        return self._getitem(index)

    def __setitem__(self, index, value):
        self._setitem(index, value)


def _init(t: Tensor, handle, shape: tuple, dtype: dt.dtype, vc=None) -> None:
    t._h = handle
    t._shape = shape
    t.dtype = dtype
    t.requires_grad = False
    t._grad = None
    t.grad_fn = None
    t._out_idx = 0
    t._vc = vc if vc is not None else [0]
    t._hooks = None
    t._retains_grad = False
    t._base = None


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "int64": "LongTensor", "int32": "IntTensor", "int8": "CharTensor",
               "uint8": "ByteTensor", "bool": "BoolTensor", "bfloat16": "BFloat16Tensor",
               "int16": "ShortTensor"}


def _wrap_dim(dim: int, ndim: int, op: str = "") -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a tensor of {ndim} dims")
    return dim % n


# Bumped whenever state a compiled graph may have bound changes identity: a tensor's storage
# swapped (``t.data = other``), a module's parameter, buffer or child replaced, an optimizer's
# state loaded. A graph checks its bindings again when it has moved (``nn/graph/graph.py``).
_state_generation = [0]


def state_generation() -> int:
    """The current state generation (see above)."""
    return _state_generation[0]


def bump_state_generation() -> None:
    """Note that bound state may have changed identity (see above)."""
    _state_generation[0] += 1


def unsynced_array(t: "Tensor") -> np.ndarray:
    """The memory of eager tensor ``t`` without a VM sync point. For code that runs as part of
    a VM instruction already ordered after every access to ``t`` (a graph call reading its
    inputs and variables): syncing there would wait for that very instruction."""
    h = t._h
    if type(h) is EagerBlob:
        return h.raw
    return h.get()


def register_tensor_methods(methods: dict) -> None:
    """Attach functions as Tensor methods (used by each functional module)."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
