"""Printing of a Tensor: ``repr(t)`` as ``tensor([...], dtype=...)`` (split from
``actorflow/tensor.py``), shaped by ``flow.set_printoptions``.
"""
from __future__ import annotations

import sys

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.tensor_blob import EagerBlob


_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=float("inf"), edgeitems=3, linewidth=80)}
PRINT_OPTS = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print (PyTorch's and OneFlow's options): ``precision`` digits after the
    point (default 4), more than ``threshold`` elements (1000) are summarised to ``edgeitems``
    (3) at each end of each dim, lines wrap at ``linewidth`` (80) characters; ``profile``
    (``"default"``, ``"short"``, ``"full"``) resets all of them first; ``sci_mode`` True or
    False forces or forbids scientific notation (None: chosen from the values)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}, "
                             f"got {profile!r}")
        PRINT_OPTS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"set_printoptions: {name} must be a non-negative number, got "
                                 f"{value!r}")
            PRINT_OPTS[name] = value
    PRINT_OPTS["sci_mode"] = sci_mode


def _np_options() -> dict:
    threshold = PRINT_OPTS["threshold"]
    return dict(threshold=sys.maxsize if threshold == float("inf") else int(threshold),
                edgeitems=int(PRINT_OPTS["edgeitems"]), max_line_width=int(PRINT_OPTS["linewidth"]))


def _float_body(a: np.ndarray) -> str:
    precision = int(PRINT_OPTS["precision"])
    sci = PRINT_OPTS["sci_mode"]
    if sci is not None:
        spec = f".{precision}e" if sci else f".{precision}f"
        return np.array2string(a, separator=", ", prefix="tensor(",
                               formatter={"float_kind": lambda v: format(v, spec)},
                               **_np_options())
    finite = a[np.isfinite(a)]
    # as in OneFlow/PyTorch: "1., 2." when every value is whole, else `precision` decimals
    whole = bool(np.all(finite == np.round(finite)))
    return np.array2string(a, separator=", ", prefix="tensor(", precision=precision,
                           floatmode="maxprec_equal" if whole else "fixed",
                           suppress_small=False, **_np_options())


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
        body = _float_body(a)
    else:
        body = np.array2string(a, separator=", ", prefix="tensor(", **_np_options())
    extras = [f"placement={h.placement}", f"sbp={h.sbp}"] if glob else []
    extras.append(f"dtype={t.dtype!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    if a.size == 0:
        body = f"[], size={tuple(t._shape)}"
    return f"tensor({body}, {', '.join(extras)})"
