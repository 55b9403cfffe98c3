"""Tensor creation: from data (tensor, as_tensor, from_numpy) and from attrs (zeros, arange,
randn, ...). Creation from attrs goes through registered ops, so a Graph can trace it."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.framework.device import as_device
from actorflow.dispatch import apply
from actorflow.dispatch.common import allocate
from actorflow.dispatch.meta import creating_on
from actorflow.functional.activation import sin
from actorflow.functional.elementwise import cast, mul, rpow
from actorflow.dispatch import global_tensor as gt
from actorflow.dispatch import global_meta as meta
from actorflow.framework.sbp_parallel import broadcast
from actorflow.ops import registry
from actorflow.ops.creation import as_shape
from actorflow.ops.int_scalars import check_int_scalar, int_scalar
from actorflow.random import Generator
from actorflow import scope
from actorflow.tensor import Size, Tensor

_constant = registry.get("constant")


def _shape(size, op_name: str = "size") -> tuple:
    return as_shape(op_name, size)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_data_dtype(data) -> tuple[dt.dtype, np.ndarray | None]:
    """The dtype ``tensor`` gives ``data``, and the NumPy array made on the way (if any)."""
    if isinstance(data, (np.ndarray, np.generic)):  # NumPy arrays and scalars keep their dtype
        return dt.from_numpy_dtype(data.dtype), None
    arr = np.asarray(data)
    if arr.dtype.kind == "f":
        return dt.get_default_dtype(), arr
    if arr.dtype.kind == "b":
        return dt.bool_, arr
    if arr.dtype.kind in "iu" or _all_ints(arr):
        return dt.int64, arr
    raise TypeError(f"tensor: can't build a tensor from {type(data).__name__} data "
                    f"(elements of NumPy type {arr.dtype})")


def _all_ints(arr: np.ndarray) -> bool:
    """True for an object array holding Python ints only (ints beyond 64 bits land there)."""
    return (arr.dtype == object and arr.size > 0
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                    for v in arr.flat))


def _int_array_from_data(name: str, data, d: dt.dtype, arr: np.ndarray | None) -> np.ndarray:
    """Python data (numbers, nested lists; not an array) as a new array of the integer dtype
    ``d``; ``arr``: ``np.asarray(data)`` if already made. As in PyTorch each number must be
    representable in ``d`` (unsigned dtypes also take ints down to -max, which wrap); floats
    are truncated toward zero."""
    if arr is None:
        arr = np.asarray(data)  # a new array: data is never an ndarray here
    if arr.dtype == d.np:
        return arr
    if arr.dtype.kind == "b" or arr.size == 0:
        return arr.astype(d.np)
    if arr.dtype.kind in "iuf":
        try:  # the extremes decide; a float array is checked by float rules, which are
            for v in (arr.min(), arr.max()):  # stricter only for negative ints (unsigned d)
                check_int_scalar(name, v.item(), d, exact=True)
            return arr.astype(d.np)
        except OverflowError:
            if arr.dtype.kind != "f" or d.is_signed:
                raise
    # Mixed ints and floats, or ints beyond 64 bits: check each number in its own type.
    objs = np.array(data, dtype=object)
    for v in objs.flat:
        check_int_scalar(name, v.item() if isinstance(v, np.generic) else v, d, exact=True)
    return np.array([int_scalar(v, d.np) for v in objs.flat], dtype=object).reshape(
        objs.shape).astype(d.np)


def _nested_tensors_to_array(data):
    if isinstance(data, Tensor):
        return data._array()
    if isinstance(data, (list, tuple)):
        return [_nested_tensors_to_array(d) for d in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False,
           pin_memory: bool = False, placement=None, sbp=None) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays or tensors);
    with ``placement`` and ``sbp``, a global tensor of those logical values."""
    as_device(device)
    if isinstance(data, Tensor):
        src = data._array()
        d = dt.as_dtype(dtype) if dtype is not None else data.dtype
    else:
        if isinstance(data, (list, tuple)):
            data = _nested_tensors_to_array(data)
        d, arr = (dt.as_dtype(dtype), None) if dtype is not None else _infer_data_dtype(data)
        src = data
    if d._category == 1 and not isinstance(src, np.ndarray):  # arrays and tensors are cast
        arr = _int_array_from_data("tensor", src, d, arr)
    else:
        arr = np.array(src, dtype=d.np, copy=True)
    return _global(Tensor._wrap(arr, d), placement, sbp, requires_grad, "tensor")


def _global(t: Tensor, placement, sbp, requires_grad: bool, op: str = "tensor") -> Tensor:
    """``t`` (the full logical values, the same on every rank) as a global tensor on
    ``placement`` laid out as ``sbp`` (each rank keeps its shard), or ``t`` itself. The ranks
    must have made ``t`` of one shape and dtype (checked once per signature: ``op`` names the
    creation op in the error every rank raises otherwise). Without placement and sbp, the
    global mode's (``flow.utils.global_view.global_mode``) apply, if it is on."""
    if placement is None and sbp is None:
        if t.is_global or scope.global_mode() is None:  # (made global by an inner creation)
            return _finish(t, requires_grad)
        placement, sbp = scope.global_mode()
    if placement is None or sbp is None:
        raise ValueError("a global tensor needs both placement and sbp")
    if not t.is_lazy:
        meta.check_created(f"flow.{op}", tuple(t._shape), t.dtype, placement, sbp)
    return _finish(gt.from_full(t, placement, sbp, f"flow.{op}"), requires_grad)


def _like_global(x: Tensor) -> tuple:
    """(placement, sbp) for a tensor like ``x``: a global ``x``'s (partial_sum made
    broadcast: the values are the logical ones), else (None, None). Inside a distributed
    graph's trace ``x`` may be a global lazy tensor: the result is one too (``from_full``)."""
    if not x.is_global:
        return None, None
    sbp = tuple(broadcast if s.is_partial_sum else s for s in x.sbp)
    return x.placement, sbp


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with a NumPy array (or tensor) when no cast is needed
    (shared as by ``from_numpy``)."""
    as_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dt.as_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array``: writes to either show in the other.

    What is shared, as in PyTorch: the array's memory, both ways, at every moment. The VM
    can't see NumPy code, so every op that reads or writes this tensor (or a view of it)
    completes before it returns: writing ``array`` after ``y = t * 2`` leaves ``y`` as it
    was, and after ``t.add_(1)`` the array already holds the sum. (Such ops don't overlap
    with the caller; ``flow.tensor(array)`` copies, and its ops stay asynchronous.) The same
    holds for ``as_tensor(array)`` and for the array ``Tensor.numpy()`` returns."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    t = Tensor._wrap(array, dt.from_numpy_dtype(array.dtype))
    t._h.storage.shared = True
    return t


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False,
         placement=None, sbp=None) -> Tensor:
    """A tensor of shape ``size`` filled with ``fill_value``.

    An integer dtype must be able to hold the value, as in PyTorch (unsigned dtypes also take
    ints down to -max, which wrap; floats are truncated toward zero); else OverflowError."""
    as_device(device)
    return _full("full", size, fill_value, dtype, requires_grad, placement, sbp)


def _full(name: str, size, fill_value, dtype, requires_grad: bool, placement=None,
          sbp=None) -> Tensor:
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    d = dt.as_dtype(dtype) if dtype is not None else dt.scalar_dtype(fill_value)
    if d._category == 1:
        check_int_scalar(name, fill_value, d, exact=True)
        fill_value = int_scalar(fill_value, d.np)
    t = apply(_constant, [], {"shape": as_shape(name, (size,)), "dtype": d,
                              "value": fill_value})[0]
    return _global(t, placement, sbp, requires_grad, name)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, placement=None,
          sbp=None) -> Tensor:
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    as_device(device)
    return _full("zeros", _shape(size, "zeros"), 0, d, requires_grad, placement, sbp)


def ones(*size, dtype=None, device=None, requires_grad: bool = False, placement=None,
          sbp=None) -> Tensor:
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    as_device(device)
    return _full("ones", _shape(size, "ones"), 1, d, requires_grad, placement, sbp)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, placement=None,
          sbp=None) -> Tensor:
    """An uninitialised tensor (its values are whatever the memory held). Global with
    ``placement`` and ``sbp``: then its values are zeros, so that the shards of a broadcast or
    split layout agree among the ranks as the layout says."""
    as_device(device)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if placement is not None or sbp is not None or scope.global_mode() is not None:
        return _full("empty", _shape(size, "empty"), 0, d, requires_grad, placement, sbp)
    return _finish(Tensor._wrap(allocate("empty", _shape(size, "empty"), d), d), requires_grad)


def _like(x: Tensor, dtype):
    return tuple(x._shape), (dt.as_dtype(dtype) if dtype is not None else x.dtype)


def _like_placed(name: str, x: Tensor, device, placement, sbp) -> tuple:
    """(placement, sbp) of a ``*_like`` result, as OneFlow: a ``device`` makes it local, no
    argument takes ``x``'s layout (``_like_global``), one of placement/sbp given takes the
    other from a global ``x``."""
    if device is not None:
        if placement is not None or sbp is not None:
            raise ValueError(f"{name}: give device or placement/sbp, not both")
        as_device(device)
        return None, None
    if placement is None and sbp is None:
        return _like_global(x)
    if placement is None or sbp is None:
        if not x.is_global:
            raise ValueError(f"{name}: a local input needs both placement and sbp for a global "
                             f"result")
        pl, xs = _like_global(x)
        return (pl if placement is None else placement), (xs if sbp is None else sbp)
    return placement, sbp


def zeros_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False,
               placement=None, sbp=None) -> Tensor:
    """Zeros shaped like ``x`` (of its dtype unless ``dtype``), laid out as ``_like_placed``."""
    shape, d = _like(x, dtype)
    pl, sbp = _like_placed("zeros_like", x, device, placement, sbp)
    return full(shape, 0, dtype=d, requires_grad=requires_grad, placement=pl, sbp=sbp)


def ones_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False,
              placement=None, sbp=None) -> Tensor:
    """Ones shaped like ``x`` (of its dtype unless ``dtype``), laid out as ``_like_placed``."""
    shape, d = _like(x, dtype)
    pl, sbp = _like_placed("ones_like", x, device, placement, sbp)
    return full(shape, 1, dtype=d, requires_grad=requires_grad, placement=pl, sbp=sbp)


def full_like(x: Tensor, fill_value, dtype=None, device=None,
              requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """A tensor shaped like ``x`` (of its dtype unless ``dtype``) filled with ``fill_value``;
    the value must fit an integer dtype as in ``full``; laid out as ``_like_placed``."""
    shape, d = _like(x, dtype)
    pl, sbp = _like_placed("full_like", x, device, placement, sbp)
    return _full("full_like", shape, fill_value, d, requires_grad, pl, sbp)


def empty_like(x: Tensor, dtype=None, device=None, requires_grad: bool = False,
               placement=None, sbp=None) -> Tensor:
    """An uninitialised tensor shaped like ``x``, laid out as ``_like_placed`` (as ``empty``)."""
    shape, d = _like(x, dtype)
    pl, sbp = _like_placed("empty_like", x, device, placement, sbp)
    return empty(shape, dtype=d, requires_grad=requires_grad, placement=pl, sbp=sbp)


def arange(start, end=None, step=1, dtype=None, device=None,
           requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Values ``start, start+step, ...`` below ``end`` (``arange(n)`` counts from 0)."""
    as_device(device)
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if dtype is None:
        d = dt.result_type([], (), (start, end, step))
    else:
        d = dt.as_dtype(dtype)
    t = apply(registry.get("arange"), [], {"start": start, "end": end, "step": step,
                                           "dtype": d})[0]
    return _global(t, placement, sbp, requires_grad, "arange")


def linspace(start, end, steps: int, dtype=None, device=None,
             requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` (global with ``placement``
    and ``sbp``)."""
    as_device(device)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    t = apply(registry.get("linspace"), [], {"start": float(start), "end": float(end),
                                             "steps": int(steps), "dtype": d})[0]
    return _global(t, placement, sbp, requires_grad, "linspace")


def eye(n: int, m: int | None = None, dtype=None, device=None,
        requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """The ``n x m`` identity matrix (global with ``placement`` and ``sbp``)."""
    as_device(device)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    t = apply(registry.get("eye"), [], {"n": int(n), "m": int(n if m is None else m),
                                        "dtype": d})[0]
    return _global(t, placement, sbp, requires_grad, "eye")


class RandomDtypeError(TypeError, NotImplementedError):
    """A random op asked for a non-floating dtype: a TypeError, and the NotImplementedError
    OneFlow raises."""


def _random(op_name, size, dtype, requires_grad, generator=None, placement=None, sbp=None,
            api: str | None = None, **attrs):
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise RandomDtypeError(f"{op_name}: random values need a floating dtype, got {d}")
    attrs.update(shape=_shape(size, op_name), dtype=d)
    if generator is not None:
        attrs["seed"] = generator.next_seed()
    elif placement is not None or (sbp is None and scope.global_mode() is not None):
        # every rank makes the full logical tensor with one seed, then keeps its shard
        attrs["seed"] = gt.agreed_seed()
    return _global(apply(registry.get(op_name), [], attrs)[0], placement, sbp, requires_grad,
                   api or op_name)


def _size_arg(name: str, shape: tuple, size) -> tuple:
    """The shape from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if size is not None:
        if shape:
            raise TypeError(f"{name}(): got the size both positionally and as size=")
        return (size,)
    return shape


def rand(*shape, size=None, dtype=None, device=None, generator=None,
         requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Uniform values in [0, 1); the shape as ints, a sequence or ``size=`` (global with
    ``placement`` and ``sbp``: the same logical values whatever the world size and sbp)."""
    as_device(device)
    return _random("uniform", _size_arg("rand", shape, size), dtype, requires_grad, generator,
                   placement, sbp, "rand", low=0.0, high=1.0)


def randn(*shape, size=None, dtype=None, device=None, generator=None,
          requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Standard normal values; the shape as ints, a sequence or ``size=`` (global with
    ``placement`` and ``sbp``: the same logical values whatever the world size and sbp)."""
    as_device(device)
    return _random("normal", _size_arg("randn", shape, size), dtype, requires_grad, generator,
                   placement, sbp, "randn", mean=0.0, std=1.0)


def normal(mean=0.0, std=1.0, size=None, *, dtype=None, device=None, generator=None,
           requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Normal values with ``mean`` and ``std`` (numbers) and shape ``size`` (global with
    ``placement`` and ``sbp``: the same logical values whatever the world size and sbp)."""
    as_device(device)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if placement is not None or sbp is not None:
            raise ValueError("normal: placement and sbp are for numbers mean and std; a "
                             "tensor mean or std gives the result its own placement")
        from actorflow.functional.elementwise import add, mul
        _check_std(std)
        shape = tuple((mean if isinstance(mean, Tensor) else std)._shape)
        z = _random("normal", (shape,), dtype or (mean if isinstance(mean, Tensor) else std).dtype,
                    False, generator, mean=0.0, std=1.0)
        return add(mul(z, std), mean)
    if size is None:
        raise TypeError("normal: size is required when mean and std are numbers")
    return _random("normal", (size,), dtype, requires_grad, generator, placement, sbp,
                   mean=float(mean), std=float(std))


def _check_std(std) -> None:
    """``normal``'s std is >= 0 everywhere (a tensor std is read: a sync point, as in
    PyTorch; inside a graph's trace it can't be read and is not checked)."""
    if isinstance(std, Tensor):
        from actorflow.functional.elementwise import lt

        bad = not std.is_lazy and std.numel() > 0 and bool(lt(std, 0).any().item())
        what = f"a tensor std of shape {tuple(std._shape)} has a negative element"
    else:
        bad, what = float(std) < 0, f"got std {std}"
    if bad:
        raise RuntimeError(f"normal: expects all elements of std >= 0.0 ({what})")


def _seed_attrs(attrs: dict, generator, placement) -> dict:
    """A random op's seed: the generator's, or for a global result one the ranks agree on
    (every rank makes the full logical tensor, then keeps its shard)."""
    if generator is not None:
        attrs["seed"] = generator.next_seed()
    elif placement is not None or scope.global_mode() is not None:
        attrs["seed"] = gt.agreed_seed()
    return attrs


def randint(low, high=None, size=None, dtype=None, device=None, generator=None,
            requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Random integers in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``
    (global with ``placement`` and ``sbp``)."""
    as_device(device)
    if size is None:
        if isinstance(high, (tuple, list, Size)):
            low, high, size = 0, low, high
        else:
            raise TypeError("randint: size is required")
    d = dt.as_dtype(dtype) if dtype is not None else dt.int64
    attrs = {"shape": tuple(size), "dtype": d, "low": int(low), "high": int(high)}
    t = apply(registry.get("randint"), [], _seed_attrs(attrs, generator, placement))[0]
    return _global(t, placement, sbp, requires_grad, "randint")


def randperm(n: int, dtype=None, device=None, generator=None, requires_grad: bool = False,
             placement=None, sbp=None) -> Tensor:
    """A random permutation of ``0 .. n-1`` (global with ``placement`` and ``sbp``)."""
    as_device(device)
    attrs = {"n": int(n), "dtype": dt.as_dtype(dtype) if dtype is not None else dt.int64}
    t = apply(registry.get("randperm"), [], _seed_attrs(attrs, generator, placement))[0]
    return _global(t, placement, sbp, requires_grad, "randperm")


def bernoulli(input: Tensor, p=None, *, generator=None, dtype=None) -> Tensor:
    """0/1 draws: 1 with probability ``input`` (or ``p``, if given), of ``input``'s dtype unless
    ``dtype``."""
    attrs = {"p": p}
    if dtype is not None:
        attrs["dtype"] = dt.as_dtype(dtype)
    if generator is not None:
        attrs["seed"] = generator.next_seed()
    return apply(registry.get("bernoulli"), [input], attrs)[0]


def _placed_like(x: Tensor, placement, sbp) -> tuple:
    """(placement, sbp) of a ``*_like`` result: the ones given, else a global ``x``'s."""
    return (placement, sbp) if placement is not None or sbp is not None else _like_global(x)


def rand_like(x: Tensor, dtype=None, device=None, generator=None,
              requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Uniform values in [0, 1) shaped like ``x`` (of its dtype unless ``dtype``; global like
    a global ``x`` or with ``placement`` and ``sbp``)."""
    pl, sb = _placed_like(x, placement, sbp)
    return rand(tuple(x._shape), dtype=dtype or x.dtype, device=device, generator=generator,
                requires_grad=requires_grad, placement=pl, sbp=sb)


def randn_like(x: Tensor, dtype=None, device=None, generator=None,
               requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Standard normal values shaped like ``x`` (of its dtype unless ``dtype``; global like a
    global ``x`` or with ``placement`` and ``sbp``)."""
    pl, sb = _placed_like(x, placement, sbp)
    return randn(tuple(x._shape), dtype=dtype or x.dtype, device=device, generator=generator,
                 requires_grad=requires_grad, placement=pl, sbp=sb)


def randint_like(x: Tensor, low, high=None, dtype=None, device=None, generator=None,
                 requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """Random integers in [low, high) (``randint_like(x, high)``: from 0) shaped like ``x``
    (global like a global ``x`` or with ``placement`` and ``sbp``)."""
    if high is None:
        low, high = 0, low
    pl, sb = _placed_like(x, placement, sbp)
    return randint(low, high, tuple(x._shape), dtype=dtype or x.dtype, device=device,
                   generator=generator, requires_grad=requires_grad, placement=pl, sbp=sb)


def logspace(start, end, steps: int, base: float = 10.0, dtype=None, device=None,
             requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """``base ** linspace(start, end, steps)``; an integer dtype truncates the powers (global
    with ``placement`` and ``sbp``)."""
    as_device(device)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    exps = linspace(start, end, steps, dtype=dt.float64)
    t = cast(rpow(exps, float(base)), d)
    return _global(t, placement, sbp, requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    """The Hann window ``sin(pi * n / N)**2``, ``N = window_length`` when ``periodic`` else
    ``window_length - 1`` (global with ``placement`` and ``sbp``)."""
    as_device(device)
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    if not d.is_floating_point:
        raise TypeError(f"hann_window: expects a floating dtype, got {d}")
    n = int(window_length)
    if n < 0:
        raise ValueError(f"hann_window: window_length must be non-negative, got {n}")
    if n == 1:
        return _global(full((1,), 1.0, dtype=d), placement, sbp, requires_grad, "hann_window")
    denom = n if periodic else n - 1
    s = sin(mul(arange(n, dtype=dt.float64), np.pi / max(denom, 1)))
    return _global(cast(mul(s, s), d), placement, sbp, requires_grad, "hann_window")


__all__ = ["tensor", "as_tensor", "from_numpy", "full", "zeros", "ones", "empty", "zeros_like",
           "ones_like", "full_like", "empty_like", "arange", "linspace", "eye", "rand", "randn",
           "normal", "randint", "randperm", "bernoulli", "rand_like", "randn_like",
           "randint_like", "logspace", "hann_window"]

# ``device="meta"`` (and ``*_like`` of a meta tensor): the function's ops run under the meta
# interpreter and the result is a meta tensor (calls inside this module, and the Tensor
# methods of ``tensor_new``, look these names up at call time: they get the wrapped ones)
for _name in ("tensor", "as_tensor", "full", "zeros", "ones", "empty", "zeros_like",
              "ones_like", "full_like", "empty_like", "arange", "linspace", "eye", "rand", "randn",
              "normal", "randint", "randperm", "rand_like", "randn_like", "randint_like",
              "logspace", "hann_window"):
    globals()[_name] = creating_on(globals()[_name])


def _generator_get_state(self: Generator) -> Tensor:
    """The generator's state as a uint8 tensor (as in OneFlow and PyTorch): the initial seed,
    then the PCG64 state (state, increment, cached 32-bit draw)."""
    return tensor(self.state_array())


Generator.get_state = _generator_get_state  # attached from here: random sits below tensors
