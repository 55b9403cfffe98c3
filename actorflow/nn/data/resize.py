"""Resizing one (H, W, C) image the way OpenCV's ``cv2.resize`` does for OneFlow's image
ops, separably: rows, then columns, each output pixel a weighted sum of a few source pixels
(the rows of weight matrices ``Wy``, ``Wx``: ``out = Wy @ img @ Wx.T`` per channel).

* ``nearest_neighbor`` (``nn``): source ``floor(d * in / out)``;
* ``bilinear``: half-pixel centres, ``s = (d + 0.5) * in / out - 0.5``, clamped to the edge;
* ``bicubic``: the same centres, Keys' kernel with ``a = -0.75``, edge pixels repeated;
* ``area``: along an axis that shrinks, each output pixel is the mean of the input pixels it
  covers, weighted by the covered fraction; along one that grows, OpenCV's ``INTER_AREA``
  interpolation (a linear blend near pixel borders);
* ``auto``: ``bilinear`` when the image does not get smaller in area, else ``area``.

Integer images are rounded to nearest (half to even) and saturated; OpenCV's fixed-point
arithmetic for uint8 may differ from these by one grey level.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["resize_image", "INTERPOLATIONS"]

INTERPOLATIONS = ("bilinear", "nearest_neighbor", "nn", "bicubic", "area", "auto")


def _nearest(n_in: int, n_out: int) -> np.ndarray:
    w = np.zeros((n_out, n_in))
    src = np.minimum(np.floor(np.arange(n_out) * (n_in / n_out)).astype(np.int64), n_in - 1)
    w[np.arange(n_out), src] = 1.0
    return w


def _linear(n_in: int, n_out: int) -> np.ndarray:
    w = np.zeros((n_out, n_in))
    for d in range(n_out):
        f = (d + 0.5) * (n_in / n_out) - 0.5
        s = math.floor(f)
        f -= s
        if s < 0:
            s, f = 0, 0.0
        if s >= n_in - 1:
            s, f = n_in - 1, 0.0
        w[d, s] += 1.0 - f
        if f:
            w[d, s + 1] += f
    return w


def _cubic(n_in: int, n_out: int) -> np.ndarray:
    a = -0.75
    w = np.zeros((n_out, n_in))
    for d in range(n_out):
        f = (d + 0.5) * (n_in / n_out) - 0.5
        s = math.floor(f)
        t = f - s
        k = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
             ((a + 2) * t - (a + 3)) * t * t + 1,
             ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1]
        k.append(1.0 - sum(k))
        for j in range(4):
            w[d, min(max(s - 1 + j, 0), n_in - 1)] += k[j]
    return w


def _area(n_in: int, n_out: int) -> np.ndarray:
    w = np.zeros((n_out, n_in))
    scale = n_in / n_out
    if scale >= 1.0:                    # shrink: covered fractions
        for d in range(n_out):
            lo, hi = d * scale, (d + 1) * scale
            for s in range(int(math.floor(lo)), min(int(math.ceil(hi)), n_in)):
                w[d, s] = (min(hi, s + 1) - max(lo, s)) / scale
        return w
    for d in range(n_out):              # grow: OpenCV's INTER_AREA blend
        s = math.floor(d * scale)
        f = (d + 1) - (s + 1) / scale
        f = 0.0 if f <= 0 else f - math.floor(f)
        w[d, min(s, n_in - 1)] += 1.0 - f
        if f:
            w[d, min(s + 1, n_in - 1)] += f
    return w


_WEIGHTS = {"bilinear": _linear, "nearest_neighbor": _nearest, "nn": _nearest,
            "bicubic": _cubic, "area": _area}


@functools.lru_cache(maxsize=256)
def _taps(interpolation: str, n_in: int, n_out: int) -> tuple:
    """The weight matrix as taps: ``(index (n_out, K), weight (n_out, K))``, K the most
    source pixels one output pixel reads (padded with weight 0)."""
    w = _WEIGHTS[interpolation](n_in, n_out)
    k = max(1, int((w != 0).sum(axis=1).max()))
    index = np.zeros((n_out, k), np.int64)
    weight = np.zeros((n_out, k))
    for d in range(n_out):
        nz = np.flatnonzero(w[d])
        index[d, :len(nz)], weight[d, :len(nz)] = nz, w[d, nz]
    index.flags.writeable = weight.flags.writeable = False
    return index, weight


def _apply(x: np.ndarray, taps: tuple, axis: int) -> np.ndarray:
    """Resample ``x`` along ``axis`` with ``taps`` (a gather per tap: no BLAS call, which
    costs more than the work for images this small)."""
    index, weight = taps
    shape = [1] * x.ndim
    shape[axis] = index.shape[0]
    out = None
    for t in range(index.shape[1]):
        part = np.take(x, index[:, t], axis=axis) * weight[:, t].reshape(shape)
        out = part if out is None else out + part
    return out


def resize_image(img: np.ndarray, out_h: int, out_w: int, interpolation: str = "bilinear",
                 dtype=None) -> np.ndarray:
    """``img`` (H, W, C) resized to (``out_h``, ``out_w``, C), in ``dtype`` (default: its
    own)."""
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"image resize: interpolation_type must be one of {INTERPOLATIONS}, "
                         f"got {interpolation!r}")
    if img.ndim != 3:
        raise ValueError(f"image resize: images must be (H, W, C), got shape {img.shape}")
    h, w = img.shape[:2]
    if h <= 0 or w <= 0 or out_h <= 0 or out_w <= 0:
        raise ValueError(f"image resize: cannot resize a {h}x{w} image to {out_h}x{out_w}")
    if interpolation == "auto":
        interpolation = "bilinear" if out_h * out_w >= h * w else "area"
    res = _apply(_apply(img.astype(np.float64), _taps(interpolation, h, out_h), 0),
                 _taps(interpolation, w, out_w), 1)
    out_dtype = np.dtype(img.dtype if dtype is None else dtype)
    if out_dtype.kind in "ui":
        info = np.iinfo(out_dtype)
        res = np.clip(np.rint(res), info.min, info.max)
    return res.astype(out_dtype)
