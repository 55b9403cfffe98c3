"""Image batch functions over tensors: ``crop_mirror_normalize`` (the op is in
``actorflow/ops/image.py``)."""
from __future__ import annotations

import os
from typing import Sequence

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["crop_mirror_normalize"]

_CMN = registry.get("crop_mirror_normalize_from_uint8")
_CHANNELS = {"BGR": 3, "RGB": 3, "GRAY": 1}


def crop_mirror_normalize(images: Tensor, mirror: Tensor | None = None,
                          color_space: str = "BGR", output_layout: str = "NCHW",
                          crop_h: int = 0, crop_w: int = 0, crop_pos_y: float = 0.5,
                          crop_pos_x: float = 0.5, mean: Sequence[float] = (0.0,),
                          std: Sequence[float] = (1.0,),
                          output_dtype: dt.dtype = dt.float32) -> Tensor:
    """Crop a ``crop_h`` x ``crop_w`` window (0: the full size) at relative position
    (``crop_pos_y``, ``crop_pos_x``) out of each uint8 image of ``images`` (N, H, W, C),
    reverse its columns where ``mirror`` (N,) is non-zero, normalise ``(x - mean) / std`` per
    channel, and lay the result out as ``output_layout`` (``NCHW`` or ``NHWC``; the
    environment variable ``ONEFLOW_ENABLE_NHWC=1`` forces NHWC, as in OneFlow) in
    ``output_dtype`` (float32 or float16)."""
    cs = str(color_space).upper()
    if cs not in _CHANNELS:
        raise ValueError(f"crop_mirror_normalize: color_space must be BGR, RGB or GRAY, got "
                         f"{color_space!r}")
    layout = "NHWC" if os.getenv("ONEFLOW_ENABLE_NHWC") == "1" else str(output_layout).upper()
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"crop_mirror_normalize: output_layout must be NCHW or NHWC, got "
                         f"{output_layout!r}")
    mean = (float(mean),) if isinstance(mean, (int, float)) else tuple(float(v) for v in mean)
    std = (float(std),) if isinstance(std, (int, float)) else tuple(float(v) for v in std)
    if any(s == 0 for s in std):
        raise ValueError(f"crop_mirror_normalize: std must be non-zero, got {std}")
    attrs = {"color_space": cs, "channels": _CHANNELS[cs], "output_layout": layout,
             "crop_h": int(crop_h), "crop_w": int(crop_w), "crop_pos_y": float(crop_pos_y),
             "crop_pos_x": float(crop_pos_x), "mean": mean, "std": std,
             "output_dtype": dt.as_dtype(output_dtype)}
    inputs = [images] if mirror is None else [images, mirror]
    return apply(_CMN, inputs, attrs)[0]
