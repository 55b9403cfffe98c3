"""Data types: the dtype objects users see, their NumPy storage types and type promotion.

bfloat16's NumPy type comes from ``ml_dtypes``, imported the first time something asks for it
(``bfloat16.np``, a bfloat16 NumPy array meeting ``as_dtype``): importing ml_dtypes registers
its ufunc loops, which took 1.3 s here with ml_dtypes 0.7 (0.2 s with 0.6), against 0.3 s for
the rest of ``import actorflow``.
"""
from __future__ import annotations

import numpy as np


class dtype:
    """A tensor element type (``actorflow.float32`` and friends)."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_differentiable",
                 "is_signed", "itemsize", "_category")

    def __init__(self, name: str, np_type, category: int):
        self.name = name
        self.np = np.dtype(np_type)
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        self.is_differentiable = category >= 2  # floating or complex: may require grad
        self.is_signed = category >= 2 or (category == 1 and self.np.kind == "i")
        self.itemsize = self.np.itemsize
        self._category = category  # 0 bool, 1 integer, 2 floating, 3 complex

    def __repr__(self) -> str:
        return f"actorflow.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


class _LazyNumpyDtype(dtype):
    """A floating dtype whose NumPy type lives in a module imported on first use (``loader()``
    returns the NumPy scalar type); everything else is known up front."""

    __slots__ = ("_np", "_loader")

    def __init__(self, name: str, loader, itemsize: int):
        self.name = name
        self._np, self._loader = None, loader
        self.is_floating_point = self.is_differentiable = self.is_signed = True
        self.is_complex = False
        self.itemsize = itemsize
        self._category = 2

    @property
    def np(self) -> np.dtype:
        if self._np is None:
            self._np = np.dtype(self._loader())
            _FROM_NP[self._np] = self
            for hook in _ON_LOAD:
                hook(self)
        return self._np


def _ml_dtypes_bfloat16():
    import ml_dtypes

    return ml_dtypes.bfloat16


# callbacks run with a lazy dtype once its NumPy type is loaded (tables keyed by NumPy dtypes)
_ON_LOAD: list = []


def on_numpy_type_loaded(hook) -> None:
    """Call ``hook(d)`` for each lazily loaded dtype ``d``: now for those already loaded, later
    for the others when their NumPy type is first used."""
    _ON_LOAD.append(hook)
    for d in ALL:
        if isinstance(d, _LazyNumpyDtype) and d._np is not None:
            hook(d)


bool_ = dtype("bool", np.bool_, 0)
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
float16 = dtype("float16", np.float16, 2)
bfloat16 = _LazyNumpyDtype("bfloat16", _ml_dtypes_bfloat16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
complex64 = dtype("complex64", np.complex64, 3)
complex128 = dtype("complex128", np.complex128, 3)

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64,
       complex128)
_NAMES = {d.name: d for d in ALL}
_NAMES.update({"bool": bool_, "half": float16, "float": float32, "double": float64,
               "long": int64, "int": int32, "char": int8, "cfloat": complex64,
               "cdouble": complex128})
_FROM_NP = {d.np: d for d in ALL if not isinstance(d, _LazyNumpyDtype)}


def _by_name(name: str) -> dtype:
    return _NAMES[name]


_default_float = float32


def get_default_dtype() -> dtype:
    """The floating dtype used for Python floats and for creation ops without ``dtype=``."""
    return _default_float


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype (float16, bfloat16, float32 or float64)."""
    global _default_float
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating dtypes are allowed, got {d}")
    _default_float = d


def as_dtype(x) -> dtype:
    """Convert a dtype, a NumPy dtype, a Python type or a name to an actorflow dtype."""
    if isinstance(x, dtype):
        return x
    if x is float:
        return _default_float
    if x is int:
        return int64
    if x is bool:
        return bool_
    if isinstance(x, str) and x in _NAMES:
        return _NAMES[x]
    try:
        nd = np.dtype(x)
    except TypeError:
        raise TypeError(f"cannot interpret {x!r} as an actorflow dtype") from None
    if nd in _FROM_NP:
        return _FROM_NP[nd]
    if nd.name == "bfloat16" and bfloat16.np == nd:  # from ml_dtypes, before we loaded it
        return bfloat16
    if nd == np.uint16 or nd == np.uint32 or nd == np.uint64:
        return int64
    raise TypeError(f"unsupported dtype {nd}")


def from_numpy_dtype(nd: np.dtype) -> dtype:
    """The actorflow dtype stored as NumPy dtype ``nd`` (raises for unsupported ones)."""
    d = _FROM_NP.get(nd)
    if d is None:
        return as_dtype(nd)
    return d


# ---- promotion -------------------------------------------------------------------------------

_ORDER_INT = {uint8: 0, int8: 1, int16: 2, int32: 3, int64: 4}


def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a._category != b._category:
        hi, lo = (a, b) if a._category > b._category else (b, a)
        if hi._category == 3 and lo._category == 2:  # float64 + complex64 -> complex128
            return _promote_pair(hi, _complex_of(lo))
        return hi
    if a._category == 1:
        if {a, b} == {uint8, int8}:
            return int16
        return a if _ORDER_INT[a] > _ORDER_INT[b] else b
    if a._category == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    if a._category == 3:
        return a if a.itemsize > b.itemsize else b
    return a


def _complex_of(d: dtype) -> dtype:
    """The complex dtype whose parts hold floating dtype ``d`` (float64: complex128, else
    complex64)."""
    return complex128 if d is float64 else complex64


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's promotion of two dtypes (both from dimensioned tensors)."""
    return _promote_pair(as_dtype(a), as_dtype(b))


def result_type(tensor_dtypes, zero_dim_dtypes=(), scalars=()) -> dtype:
    """Result dtype following PyTorch: dimensioned tensors decide first; zero-dim tensors and
    Python scalars only raise the *category* (bool < integer < floating)."""
    res = None
    for d in tensor_dtypes:
        res = d if res is None else _promote_pair(res, d)
    zres = None
    for d in zero_dim_dtypes:
        zres = d if zres is None else _promote_pair(zres, d)
    if res is None:
        res = zres
    elif zres is not None and zres._category > res._category:
        res = _raise_category(res, zres)
    for s in scalars:
        sd = scalar_dtype(s)
        if res is None:
            res = sd
        elif sd._category > res._category:
            res = _raise_category(res, sd)
    return res


def _raise_category(res: dtype, higher: dtype) -> dtype:
    """``higher``'s category with ``res``'s precision where it has one: a complex scalar (or
    zero-dim tensor) meeting a float64 tensor gives complex128, as in PyTorch."""
    if higher._category == 3 and res._category == 2:
        return _complex_of(res) if higher is complex64 else higher
    return higher


def scalar_dtype(s) -> dtype:
    """The dtype a Python scalar takes on its own."""
    if isinstance(s, (bool, np.bool_)):
        return bool_
    if isinstance(s, (int, np.integer)):
        return int64
    if isinstance(s, (float, np.floating)):
        return _default_float
    if isinstance(s, (complex, np.complexfloating)):
        return _complex_of(_default_float)
    raise TypeError(f"expected a Python number, got {type(s).__name__}")
