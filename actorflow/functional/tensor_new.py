"""``Tensor.new`` and ``Tensor.new_*``: new tensors of a tensor's dtype (unless ``dtype``),
global like a global tensor (as OneFlow's). The creation functions are looked up in
``functional.creation`` at call time, so ``device="meta"`` wrapping applies to them too."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.framework.sbp_parallel import broadcast
from actorflow.functional import creation as c
from actorflow.tensor import Size, Tensor, register_tensor_methods


def _new_dtype(self: Tensor, dtype):
    return self.dtype if dtype is None else dt.as_dtype(dtype)


def _new_global(self: Tensor, shape: tuple, placement, sbp) -> tuple:
    """(placement, sbp) of a ``new_*`` tensor of ``shape``: the ones given, else a global
    ``self``'s (OneFlow's; partial_sum made broadcast, a split dim the new shape lacks
    broadcast), else (None, None)."""
    if placement is not None or sbp is not None:
        return placement, sbp
    pl, like = c._like_global(self)
    if pl is None:
        return None, None
    return pl, tuple(broadcast if s.is_split and s.dim >= len(shape) else s for s in like)


def _new_empty(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False,
               placement=None, sbp=None) -> Tensor:
    shape = c._shape(size)
    pl, sbp = _new_global(self, shape, placement, sbp)
    if pl is not None:  # a global tensor's values are made in full on every rank: zeros
        return c.zeros(shape, dtype=_new_dtype(self, dtype), requires_grad=requires_grad,
                     placement=pl, sbp=sbp)
    return c.empty(shape, dtype=_new_dtype(self, dtype), device=device,
                 requires_grad=requires_grad)


def _new_zeros(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False,
               placement=None, sbp=None) -> Tensor:
    # no size (or None): self's shape, as OneFlow's Tensor.new_zeros
    shape = tuple(self._shape) if size in ((), (None,)) else c._shape(size)
    pl, sbp = _new_global(self, shape, placement, sbp)
    return c.zeros(shape, dtype=_new_dtype(self, dtype), device=device,
                 requires_grad=requires_grad, placement=pl, sbp=sbp)


def new_zeros(x: Tensor, size=None, dtype=None, device=None, placement=None, sbp=None,
              requires_grad: bool = False) -> Tensor:
    """``flow.new_zeros(x, size)`` (OneFlow's): zeros of ``size`` (default ``x``'s shape) and
    ``x``'s dtype, device or placement and sbp unless given; ``x.new_zeros(size)``."""
    if not isinstance(x, Tensor):
        raise TypeError(f"new_zeros: expected a Tensor as first argument, got {type(x).__name__}")
    return _new_zeros(x, *(() if size is None else (size,)), dtype=dtype, device=device,
                      requires_grad=requires_grad, placement=placement, sbp=sbp)


def _new_ones(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False,
              placement=None, sbp=None) -> Tensor:
    shape = c._shape(size)
    pl, sbp = _new_global(self, shape, placement, sbp)
    return c.ones(shape, dtype=_new_dtype(self, dtype), device=device,
                requires_grad=requires_grad, placement=pl, sbp=sbp)


def _new_full(self: Tensor, size, fill_value, dtype=None, device=None,
              requires_grad: bool = False, placement=None, sbp=None) -> Tensor:
    shape = c._shape((size,))
    pl, sbp = _new_global(self, shape, placement, sbp)
    return c.full(shape, fill_value, dtype=_new_dtype(self, dtype), device=device,
                requires_grad=requires_grad, placement=pl, sbp=sbp)


def _new_tensor(self: Tensor, data, dtype=None, device=None, requires_grad: bool = False,
                placement=None, sbp=None) -> Tensor:
    """A tensor of ``data`` of this tensor's dtype (unless ``dtype``); from a global tensor,
    global on its placement and sbp (unless ``placement``/``sbp``), as OneFlow's."""
    t = c.tensor(data, dtype=_new_dtype(self, dtype), device=device)
    pl, sbp = _new_global(self, tuple(t._shape), placement, sbp)
    if pl is not None:
        t = c.gt.from_full(t, pl, sbp)
    return c._finish(t, requires_grad)


def _new(self: Tensor, *args) -> Tensor:
    """PyTorch's legacy ``Tensor.new``: ``new()`` an empty tensor, ``new(2, 3)`` or
    ``new(Size)`` uninitialised values, ``new(data)`` (list, array) the data, ``new(tensor)``
    that tensor (same dtype only); always of this tensor's dtype. From a global tensor the
    result is global on its placement and sbp (as in ``new_empty``/``new_tensor``), as
    OneFlow's; ``new(tensor)`` takes local tensors only, as OneFlow's."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        if self.is_global or args[0].is_global:
            raise TypeError("new(tensor): takes local tensors only (as OneFlow's)")
        if args[0].dtype is not self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype}, got "
                            f"{args[0].dtype}")
        return args[0].detach()
    if len(args) == 1 and not isinstance(args[0], (int, Size)):
        return _new_tensor(self, args[0])
    return _new_empty(self, *(args if args else (0,)))


register_tensor_methods({"new": _new, "new_empty": _new_empty, "new_zeros": _new_zeros,
                         "new_ones": _new_ones, "new_full": _new_full, "new_tensor": _new_tensor})
