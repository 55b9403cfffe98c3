"""``multinomial``: draws of category indices from rows of non-negative weights.

Input (K,) or (N, K) weights (they need not sum to one); output (num_samples,) or (N,
num_samples) int64. With replacement each draw inverts the row's cumulative distribution at
a uniform value (one ``searchsorted`` over all rows, each row's CDF lifted by its row index);
without replacement the row's categories race with exponential(1) / weight keys and the
``num_samples`` smallest win, which samples them in the order sequential draws without
replacement would. Random (attr ``seed``); not differentiable.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework.dtype import int64
from actorflow.ops._common import is_floating
from actorflow.ops.registry import Meta, OpError, fail, register
from actorflow.random import numpy_rng

multinomial = register(
    "multinomial", random=True,
    doc="Draw attr num_samples category indices (int64) per row of non-negative weights "
        "(input (K,) or (N, K)), with or without attr replacement.")


@multinomial.infer
def _(inputs, attrs):
    p = inputs[0]
    n = attrs["num_samples"]
    if len(p._shape) not in (1, 2):
        fail("multinomial", "expected a 1-d or 2-d tensor of weights", p._shape)
    if not is_floating(p.dtype.np):
        fail("multinomial", f"expected floating-point weights, got {p.dtype}", p._shape)
    k = p._shape[-1]
    if k == 0:
        fail("multinomial", "the weights must name at least one category", p._shape)
    if n <= 0:
        fail("multinomial", f"num_samples must be positive, got {n}", p._shape)
    if not attrs["replacement"] and n > k:
        fail("multinomial", f"cannot draw {n} samples without replacement from {k} "
                            f"categories", p._shape)
    return [Meta(tuple(p._shape[:-1]) + (n,), int64)]


def _check_rows(p: np.ndarray, n: int, replacement: bool) -> None:
    if not np.isfinite(p).all() or (p < 0).any():
        raise OpError(f"multinomial: the weights must be finite and non-negative (shape "
                      f"{p.shape})")
    positive = (p > 0).sum(axis=1)
    if (positive == 0).any():
        raise OpError(f"multinomial: each row of weights must have a positive sum (shape "
                      f"{p.shape})")
    if not replacement and (positive < n).any():
        raise OpError(f"multinomial: cannot draw {n} samples without replacement from a row "
                      f"with only {int(positive.min())} non-zero weights (shape {p.shape})")


@multinomial.kernel("cpu")
def _(ins, outs, attrs):
    p = ins[0].astype(np.float64).reshape(-1, ins[0].shape[-1])
    out = outs[0].reshape(p.shape[0], -1)
    n, replacement = attrs["num_samples"], attrs["replacement"]
    _check_rows(p, n, replacement)
    rng = numpy_rng(attrs["seed"])
    rows, k = p.shape
    if replacement:
        cdf = np.cumsum(p, axis=1)
        cdf /= cdf[:, -1:]
        cdf[:, -1] = 1.0
        lift = np.arange(rows, dtype=np.float64)[:, None]
        u = rng.random((rows, n))
        pos = np.searchsorted((cdf + lift).reshape(-1), (u + lift).reshape(-1), side="right")
        pos = pos.reshape(rows, n) - np.arange(rows)[:, None] * k
        out[...] = np.minimum(pos, k - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = rng.standard_exponential((rows, k)) / p
        out[...] = np.argsort(keys, axis=1, kind="stable")[:, :n]
