"""Printing of a Tensor: ``repr(t)`` as ``tensor([...], dtype=...)`` (split from
``actorflow/tensor.py``).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.tensor_blob import EagerBlob


def _format(t) -> str:
    """The text of ``repr(t)`` for a Tensor ``t``."""
    h = t._h
    glob = getattr(h, "is_global", False)  # a global tensor prints its logical values
    if type(h) is not EagerBlob and not glob:
        desc = getattr(h, "describe", None)
        inner = desc() if desc else "..."
        return f"tensor({inner}, shape={tuple(t._shape)}, dtype={t.dtype!r})"
    if glob and h.placement.type == "meta":  # no values to print
        return (f"tensor(..., placement={h.placement}, sbp={h.sbp}, shape={tuple(t._shape)}, "
                f"dtype={t.dtype!r})")
    a = t._array()
    if t.dtype is dt.bfloat16 or t.dtype is dt.float16:
        a = a.astype(np.float32)
    if t.dtype.is_floating_point:
        finite = a[np.isfinite(a)]
        # as in OneFlow/PyTorch: "1., 2." when every value is whole, else 4 decimals
        whole = bool(np.all(finite == np.round(finite)))
        body = np.array2string(a, separator=", ", prefix="tensor(", precision=4,
                               floatmode="maxprec_equal" if whole else "fixed", threshold=1000,
                               edgeitems=3, suppress_small=False)
    else:
        body = np.array2string(a, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
    extras = [f"placement={h.placement}", f"sbp={h.sbp}"] if glob else []
    extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    if a.size == 0:
        body = f"[], size={tuple(t._shape)}"
    return f"tensor({body}, {', '.join(extras)})"
