"""Helpers the functional modules share: calling ops, and turning Python values into tensors."""
from __future__ import annotations

import numbers

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.dispatch import apply
from actorflow.ops.int_scalars import check_int_scalar, int_scalar
from actorflow.ops.registry import get
from actorflow.tensor import Tensor


def call(op_name: str, *inputs, **attrs):
    """Run a registered op; returns one tensor, or a tuple when the op has several outputs."""
    outs = apply(get(op_name), list(inputs), attrs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.bool_, np.number)) and not isinstance(x, Tensor)


def replicated_like(t: Tensor, like: Tensor | None) -> Tensor:
    """Local ``t`` made from Python data (a number, a list) as it meets ``like``: unchanged,
    or replicated (broadcast) on ``like``'s placement when ``like`` is global, as in OneFlow."""
    if like is not None and like.is_global:
        from actorflow.dispatch import global_tensor as gt
        from actorflow.framework.sbp_parallel import SbpParallel
        return gt.from_full(t, like.placement,
                            (SbpParallel.from_attr(("B",)),) * len(like.placement.hierarchy))
    return t


def as_tensor_like(x, like: Tensor | None = None, op_name: str = "as_tensor_like") -> Tensor:
    """A tensor for ``x``: tensors pass through, arrays are copied (the op may run after the
    caller changed the array), Python data is wrapped.

    A NumPy array meeting a global ``like`` becomes a broadcast global tensor of ``like``'s
    placement and dtype. A number takes ``like``'s dtype unless that would lower its category
    (bool < integer < float). An integral number becoming an integer tensor must be
    representable there, as in PyTorch (unsigned dtypes also take ints down to -max, which
    wrap); otherwise an OverflowError names ``op_name``, the value and the dtype.
    """
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        # a copy taken now: the op may run later, after the caller changed the array. Meeting
        # a global tensor, the array is its logical value, broadcast on that placement in the
        # global tensor's dtype (as OneFlow's tensor operators make it)
        if like is not None and like.is_global:
            return replicated_like(Tensor._wrap(np.array(x, dtype=like.dtype.np), like.dtype),
                                   like)
        return Tensor._wrap(np.array(x, copy=True), dt.from_numpy_dtype(x.dtype))
    if is_scalar(x):
        d = dt.scalar_dtype(x)
        if like is not None and d._category <= like.dtype._category:
            d = like.dtype
        if d._category == 1:
            check_int_scalar(op_name, x, d, exact=True)
            x = int_scalar(x, d.np)
        return replicated_like(Tensor._wrap(np.array(x, dtype=d.np), d), like)
    from actorflow.functional.creation import tensor
    return tensor(x)


