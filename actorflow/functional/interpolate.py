"""``interpolate`` / ``upsample`` (``torch.nn.functional`` / OneFlow signatures): resampling of
(N, C, L), (N, C, H, W) or (N, C, D, H, W) inputs.

nearest, nearest-exact, linear, bilinear, bicubic and trilinear run the ``upsample`` op
(``actorflow/ops/upsample.py``: linear, bilinear and trilinear are its ``linear`` mode over 1, 2
or 3 dims, bicubic its ``cubic`` mode); area is adaptive average pooling to the output size.
"""
from __future__ import annotations

import math

from actorflow.dispatch import apply
from actorflow.functional.pool import adaptive_avg_pool_nd
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["interpolate", "upsample", "upsample_nd", "upsample_grad"]

_UPSAMPLE = registry.get("upsample")
_UPSAMPLE_GRAD = registry.get("upsample_grad")

# mode -> (the op's mode, the number of spatial dims it takes; None: any of 1-3)
_MODES = {"nearest": ("nearest", None), "nearest-exact": ("nearest-exact", None),
          "area": ("area", None), "linear": ("linear", 1), "bilinear": ("linear", 2),
          "bicubic": ("cubic", 2), "trilinear": ("linear", 3)}


def _per_dim(name: str, what: str, value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"interpolate: {what} {tuple(value)} must have {n} values for a "
                             f"{n + 2}-d input")
        return tuple(value)
    return (value,) * n


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None) -> Tensor:
    """Resample ``input`` to ``size`` (an int or one per spatial dim) or by ``scale_factor``
    (output size ``floor(in * scale_factor)``), with ``mode`` one of nearest, nearest-exact,
    linear (3-d input), bilinear / bicubic (4-d), trilinear (5-d) or area.

    ``align_corners`` (the linear and cubic modes only): corner pixel centres map to corner
    pixel centres, rather than pixel edges to edges. ``recompute_scale_factor=True`` derives
    the interpolation's scale from the computed output size instead of the given factor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected a Tensor, got {type(input).__name__}")
    if mode not in _MODES:
        raise ValueError(f"interpolate: mode must be one of {tuple(_MODES)}, got {mode!r}")
    op_mode, wants = _MODES[mode]
    n = len(input._shape) - 2
    if n not in (1, 2, 3) or (wants is not None and n != wants):
        need = f"a {wants + 2}-d" if wants is not None else "a 3-d, 4-d or 5-d"
        raise ValueError(f"interpolate: mode {mode!r} needs {need} input (N, C, *spatial), "
                         f"got shape {tuple(input._shape)}")
    if align_corners is not None and op_mode in ("nearest", "nearest-exact", "area"):
        raise ValueError("interpolate: align_corners can only be set with the interpolating "
                         "modes linear, bilinear, bicubic and trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: exactly one of size and scale_factor must be given")
    spatial = tuple(input._shape[2:])
    scales = None
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an "
                             "explicit size")
        out = tuple(int(s) for s in _per_dim("interpolate", "size", size, n))
    else:
        factors = tuple(float(f) for f in _per_dim("interpolate", "scale_factor",
                                                   scale_factor, n))
        if any(not f > 0 for f in factors):
            raise ValueError(f"interpolate: scale_factor must be positive, got {factors}")
        out = tuple(int(math.floor(s * f)) for s, f in zip(spatial, factors))
        if not recompute_scale_factor:
            scales = factors
    if any(s <= 0 for s in out):
        raise ValueError(f"interpolate: the output size {out} of input {tuple(input._shape)} "
                         f"must be positive in every dim")
    if op_mode == "area":
        return adaptive_avg_pool_nd(input, out)
    return upsample_nd(input, {"mode": op_mode, "output_size": out, "scales": scales,
                               "align_corners": bool(align_corners)})


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """The older name of ``interpolate`` (same arguments, no ``recompute_scale_factor``)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nd(x: Tensor, attrs: dict) -> Tensor:
    """The ``upsample`` op with its normalised attrs (mode, output_size, scales,
    align_corners)."""
    return apply(_UPSAMPLE, [x], dict(attrs))[0]


def upsample_grad(dout: Tensor, input_shape, attrs: dict) -> Tensor:
    """The adjoint of ``upsample`` with ``attrs`` for an input of ``input_shape`` (its
    gradient rule)."""
    return apply(_UPSAMPLE_GRAD, [dout], dict(attrs, input_shape=tuple(input_shape)))[0]
