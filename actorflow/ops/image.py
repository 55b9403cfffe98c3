"""Image batch ops of OneFlow's data pipeline that work on ordinary tensors:
``crop_mirror_normalize_from_uint8`` (a fused crop, horizontal mirror, per-channel
normalisation and NHWC -> NCHW layout change of a uint8 image batch). No gradient: the input
is integer pixels."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.boxing import S, Sig
from actorflow.ops.registry import Meta, fail, register

crop_mirror_normalize = register(
    "crop_mirror_normalize_from_uint8",
    doc="Images (N, H, W, C) uint8 and optional mirror flags (N,) int8 -> (N, C, crop_h, "
        "crop_w) (output_layout NCHW) or (N, crop_h, crop_w, C) (NHWC) of output_dtype: "
        "out = (in[y0 + h, x0 + w] - mean[c]) / std[c], with y0 = int((H - crop_h) * "
        "crop_pos_y), x0 = int((W - crop_w) * crop_pos_x) and, where mirror[n] != 0, the "
        "window's columns reversed. crop_h / crop_w 0 keep the full size.")

_OUT_DTYPES = (dt.float32, dt.float16)


def _crop_size(attrs: dict, H: int, W: int) -> tuple:
    return (attrs["crop_h"] or H), (attrs["crop_w"] or W)


@crop_mirror_normalize.infer
def _(inputs, attrs):
    name = "crop_mirror_normalize_from_uint8"
    img = inputs[0]
    if len(img._shape) != 4 or img.dtype != dt.uint8:
        fail(name, f"images must be uint8 (N, H, W, C), got {img.dtype}", img._shape)
    n, H, W, C = img._shape
    if C != attrs["channels"]:
        fail(name, f"color_space {attrs['color_space']} needs {attrs['channels']} channels, "
                   f"the images have {C}", img._shape)
    if len(attrs["mean"]) not in (1, C) or len(attrs["std"]) not in (1, C):
        fail(name, f"mean and std must hold 1 or {C} values, got {len(attrs['mean'])} and "
                   f"{len(attrs['std'])}")
    h, w = _crop_size(attrs, H, W)
    if not (0 < h <= H and 0 < w <= W):
        fail(name, f"crop {h}x{w} must fit in the {H}x{W} images", img._shape)
    if not (0.0 <= attrs["crop_pos_y"] <= 1.0 and 0.0 <= attrs["crop_pos_x"] <= 1.0):
        fail(name, "crop_pos_y and crop_pos_x must be in [0, 1]")
    if len(inputs) > 1:
        m = inputs[1]
        if tuple(m._shape) != (n,) or m.dtype._category not in (0, 1):
            fail(name, f"mirror must be integer flags of shape ({n},), got {m.dtype}",
                 m._shape)
    out_dtype = attrs["output_dtype"]
    if out_dtype not in _OUT_DTYPES:
        fail(name, f"output_dtype must be float32 or float16, got {attrs['output_dtype']}")
    shape = (n, C, h, w) if attrs["output_layout"] == "NCHW" else (n, h, w, C)
    return [Meta(shape, out_dtype)]


@crop_mirror_normalize.kernel("cpu")
def _(ins, outs, attrs):
    img, out = ins[0], outs[0]
    _, H, W, C = img.shape
    h, w = _crop_size(attrs, H, W)
    y0 = int((H - h) * np.float32(attrs["crop_pos_y"]))
    x0 = int((W - w) * np.float32(attrs["crop_pos_x"]))
    win = img[:, y0:y0 + h, x0:x0 + w, :]
    if len(ins) > 1:
        flip = ins[1].astype(bool)
        win = np.where(flip[:, None, None, None], win[:, :, ::-1, :], win)
    mean = np.broadcast_to(np.asarray(attrs["mean"], np.float32), (C,))
    inv_std = 1.0 / np.broadcast_to(np.asarray(attrs["std"], np.float32), (C,))
    res = (win.astype(np.float32) - mean) * inv_std.astype(np.float32)
    if attrs["output_layout"] == "NCHW":
        res = res.transpose(0, 3, 1, 2)
    out[...] = res


@crop_mirror_normalize.sbp
def _(inputs, attrs):
    """Images are independent: split over the batch (the flags with them)."""
    yield Sig((S(0),) * len(inputs), (S(0),))
