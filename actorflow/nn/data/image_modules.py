"""OneFlow's image modules of the data pipeline: ``nn.image.Resize``, ``batch_align``,
``decode``, ``flip``, ``normalize`` (over ``TensorBuffer`` batches, on the host) and
``nn.CropMirrorNormalize`` (a registered op over uint8 image tensors; a ``TensorBuffer`` is
cropped to one size first)."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.functional.creation import tensor as _tensor
from actorflow.functional.image import crop_mirror_normalize
from actorflow.nn.data.image_codec import check_color_space, decode_image
from actorflow.nn.data.resize import INTERPOLATIONS, resize_image
from actorflow.nn.data.tensor_buffer import TensorBuffer, as_instances
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

__all__ = ["ImageResize", "ImageBatchAlign", "ImageDecode", "ImageFlip", "ImageNormalize",
           "CropMirrorNormalize"]


def _images(x, who: str) -> list:
    imgs = as_instances(x, who)
    for i, a in enumerate(imgs):
        if a.ndim != 3:
            raise ValueError(f"{who}: image {i} must be (H, W, C), got shape {a.shape}")
    return imgs


def _per_image(x, n: int, who: str) -> np.ndarray:
    """A per-image integer code: an int, or a tensor / sequence of ``n``."""
    if isinstance(x, Tensor):
        x = x.numpy()
    a = np.asarray(x).reshape(-1)
    if a.size == 1:
        a = np.repeat(a, n)
    if a.size != n:
        raise ValueError(f"{who}: expected one value per image ({n}), got {a.size}")
    return a.astype(np.int64)


class ImageResize(Module):
    """Resize each image (OneFlow's ``nn.image.Resize``).

    ``keep_aspect_ratio=False``: every image to ``target_size`` = (width, height), returned
    as ``(images (N, H, W, C) of dtype (default uint8), scale (N, 2) float32 as (new_w / w,
    new_h / h), None)``. ``keep_aspect_ratio=True``: the ``resize_side`` ("shorter" or
    "longer") side becomes ``target_size`` (an int) and the other follows the ratio, rounded
    half to even, bounded by ``max_size`` (shorter) or ``min_size`` (longer) when positive;
    returns ``(TensorBuffer of resized images, size (N, 2) int32 as (w, h), scale (N, 2)
    float32)``. ``interpolation_type`` is one of ``resize.INTERPOLATIONS``. The deprecated
    ``color_space``, ``interp_type``, ``resize_shorter``, ``resize_x`` / ``resize_y`` are
    accepted as OneFlow maps them."""

    def __init__(self, target_size: Union[int, Sequence[int]] = None,
                 min_size: int | None = None, max_size: int | None = None,
                 keep_aspect_ratio: bool = False, resize_side: str = "shorter",
                 channels: int = 3, dtype: dt.dtype | None = None,
                 interpolation_type: str = "auto", name: str | None = None,
                 color_space: str | None = None, interp_type: str | None = None,
                 resize_shorter: int = 0, resize_x: int = 0, resize_y: int = 0) -> None:
        super().__init__()
        if color_space is not None:
            channels = 1 if check_color_space(color_space) == "GRAY" else 3
        if interp_type is not None:
            legacy = {"Linear": "bilinear", "NN": "nearest_neighbor", "Cubic": "bicubic"}
            if interp_type not in legacy:
                raise ValueError(f"image.Resize: interp_type must be one of {sorted(legacy)}, "
                                 f"got {interp_type!r}")
            interpolation_type = legacy[interp_type]
        if resize_x > 0 and resize_y > 0:
            target_size, keep_aspect_ratio = (resize_x, resize_y), False
        if resize_shorter > 0:
            target_size, keep_aspect_ratio, resize_side = resize_shorter, True, "shorter"
        if interpolation_type not in INTERPOLATIONS:
            raise ValueError(f"image.Resize: interpolation_type must be one of "
                             f"{INTERPOLATIONS}, got {interpolation_type!r}")
        self.channels, self.interpolation_type = int(channels), interpolation_type
        self.keep_aspect_ratio = keep_aspect_ratio
        if keep_aspect_ratio:
            if not isinstance(target_size, int) or target_size <= 0:
                raise ValueError(f"image.Resize: target_size must be a positive int when "
                                 f"keep_aspect_ratio is True, got {target_size!r}")
            if resize_side not in ("shorter", "longer"):
                raise ValueError(f"image.Resize: resize_side must be 'shorter' or 'longer', "
                                 f"got {resize_side!r}")
            self.min_size, self.max_size = int(min_size or 0), int(max_size or 0)
            if self.min_size > 0 and target_size < self.min_size or \
                    self.max_size > 0 and target_size > self.max_size:
                raise ValueError(f"image.Resize: target_size {target_size} must lie in "
                                 f"[min_size, max_size] = [{min_size}, {max_size}]")
            self.target_size, self.resize_longer = target_size, resize_side == "longer"
        else:
            if (not isinstance(target_size, (list, tuple)) or len(target_size) != 2
                    or not all(isinstance(s, int) and s > 0 for s in target_size)):
                raise ValueError(f"image.Resize: target_size must be (width, height) when "
                                 f"keep_aspect_ratio is False, got {target_size!r}")
            self.dtype = dt.uint8 if dtype is None else dtype
            if self.dtype not in (dt.uint8, dt.float32):
                raise TypeError(f"image.Resize: dtype must be uint8 or float32, got "
                                f"{self.dtype}")
            self.target_w, self.target_h = target_size

    def _keep_ratio_size(self, h: int, w: int) -> tuple:
        short, long_ = min(h, w), max(h, w)
        ratio = short / long_
        if self.resize_longer:
            res_long = float(self.target_size)
            res_short = float(np.rint(res_long * ratio))
            if self.min_size > 0 and res_short < self.min_size:
                res_short = float(self.min_size)
                res_long = float(np.rint(res_short / ratio))
        else:
            res_short = float(self.target_size)
            res_long = float(np.rint(res_short / ratio))
            if self.max_size > 0 and res_long > self.max_size:
                res_long = float(self.max_size)
                res_short = float(np.rint(res_long * ratio))
        res_short, res_long = max(1, int(res_short)), max(1, int(res_long))
        return (res_long, res_short) if w < h else (res_short, res_long)  # (new_h, new_w)

    def forward(self, input):
        imgs = _images(input, "image.Resize")
        for i, a in enumerate(imgs):
            if a.shape[2] != self.channels:
                raise ValueError(f"image.Resize: image {i} has {a.shape[2]} channels, "
                                 f"channels={self.channels}")
        scale = np.zeros((len(imgs), 2), np.float32)
        if not self.keep_aspect_ratio:
            out = np.empty((len(imgs), self.target_h, self.target_w, self.channels),
                           self.dtype.np)
            for i, a in enumerate(imgs):
                out[i] = resize_image(a, self.target_h, self.target_w,
                                      self.interpolation_type, self.dtype.np)
                scale[i] = (self.target_w / a.shape[1], self.target_h / a.shape[0])
            return _tensor(out, dtype=self.dtype), _tensor(scale), None
        res, size = [], np.zeros((len(imgs), 2), np.int32)
        for i, a in enumerate(imgs):
            nh, nw = self._keep_ratio_size(a.shape[0], a.shape[1])
            res.append(resize_image(a, nh, nw, self.interpolation_type))
            size[i] = (nw, nh)
            scale[i] = (nw / a.shape[1], nh / a.shape[0])
        return TensorBuffer(res), _tensor(size), _tensor(scale)


class ImageBatchAlign(Module):
    """Stack the images into one zero-padded tensor (N, *shape) of ``dtype`` (uint8 or
    float32), each at the top left (OneFlow's ``nn.image.batch_align``). ``shape`` is
    (H, W, C); the largest height and width, rounded up to ``alignment`` (0 or a power of
    2), must fit in it."""

    def __init__(self, shape: Sequence[int], dtype: dt.dtype, alignment: int) -> None:
        super().__init__()
        if len(shape) != 3:
            raise ValueError(f"image.batch_align: shape must be (H, W, C), got {tuple(shape)}")
        if dtype not in (dt.uint8, dt.float32):
            raise TypeError(f"image.batch_align: dtype must be uint8 or float32, got {dtype}")
        if alignment < 0 or (alignment and alignment & (alignment - 1)):
            raise ValueError(f"image.batch_align: alignment must be 0 or a power of 2, got "
                             f"{alignment}")
        self.shape, self.dtype, self.alignment = tuple(int(s) for s in shape), dtype, alignment

    def forward(self, input) -> Tensor:
        imgs = _images(input, "image.batch_align")
        a = max(self.alignment, 1)
        H, W, C = self.shape
        max_h = -(-max(i.shape[0] for i in imgs) // a) * a
        max_w = -(-max(i.shape[1] for i in imgs) // a) * a
        if max_h > H or max_w > W or any(i.shape[2] != C for i in imgs):
            raise ValueError(f"image.batch_align: images {[i.shape for i in imgs]} (aligned "
                             f"{max_h}x{max_w}) do not fit shape {self.shape}")
        out = np.zeros((len(imgs),) + self.shape, self.dtype.np)
        for k, img in enumerate(imgs):
            out[k, :img.shape[0], :img.shape[1]] = img
        return _tensor(out, dtype=self.dtype)


class ImageDecode(Module):
    """Decode each encoded image (a ``TensorBuffer`` of bytes) into (H, W, C) images in
    ``color_space`` as ``dtype`` (uint8 or float32): OneFlow's ``nn.image.decode``."""

    def __init__(self, dtype: dt.dtype = dt.uint8, color_space: str = "BGR") -> None:
        super().__init__()
        if dtype not in (dt.uint8, dt.float32):
            raise TypeError(f"image.decode: dtype must be uint8 or float32, got {dtype}")
        self.dtype, self.color_space = dtype, check_color_space(color_space)

    def forward(self, input) -> TensorBuffer:
        raw = as_instances(input, "image.decode")
        for i, b in enumerate(raw):
            if b.dtype.itemsize != 1:
                raise TypeError(f"image.decode: instance {i} must hold bytes (uint8 / int8), "
                                f"got {b.dtype}")
        return TensorBuffer([decode_image(b.reshape(-1).view(np.uint8), self.color_space)
                             .astype(self.dtype.np) for b in raw])


class ImageFlip(Module):
    """Flip each image by its code (OneFlow's ``nn.image.flip``): 0 none, 1 horizontal (the
    columns), 2 vertical (the rows), 3 both. ``flip_code`` is an int or one per image."""

    def forward(self, images, flip_code) -> TensorBuffer:
        imgs = _images(images, "image.flip")
        codes = _per_image(flip_code, len(imgs), "image.flip")
        out = []
        for img, c in zip(imgs, codes):
            if not 0 <= c <= 3:
                raise ValueError(f"image.flip: flip codes are 0-3, got {c}")
            out.append(np.ascontiguousarray(img[::-1 if c & 2 else 1, ::-1 if c & 1 else 1]))
        return TensorBuffer(out)


class ImageNormalize(Module):
    """``(image - mean) / std`` per channel (OneFlow's ``nn.image.normalize``); integer
    images become float32."""

    def __init__(self, std: Sequence[float], mean: Sequence[float]) -> None:
        super().__init__()
        self.std, self.mean = tuple(float(s) for s in std), tuple(float(m) for m in mean)
        if any(s == 0 for s in self.std):
            raise ValueError(f"image.normalize: std must be non-zero, got {self.std}")

    def forward(self, input) -> TensorBuffer:
        imgs = _images(input, "image.normalize")
        out = []
        for i, img in enumerate(imgs):
            c = img.shape[2]
            if len(self.std) not in (1, c) or len(self.mean) not in (1, c):
                raise ValueError(f"image.normalize: image {i} has {c} channels; std and mean "
                                 f"need 1 or {c} values, got {len(self.std)} and "
                                 f"{len(self.mean)}")
            x = img if img.dtype.kind == "f" else img.astype(np.float32)
            out.append(((x - np.asarray(self.mean, x.dtype)) / np.asarray(self.std, x.dtype))
                       .astype(x.dtype))
        return TensorBuffer(out)


class CropMirrorNormalize(Module):
    """Fused crop, horizontal mirror, normalisation ``(x - mean) / std`` and layout change of
    uint8 images (OneFlow's ``nn.CropMirrorNormalize``, after DALI's); see
    ``actorflow.functional.image.crop_mirror_normalize``. ``input`` is a uint8 tensor (N, H,
    W, C) or a ``TensorBuffer`` of uint8 images (each cropped at the same relative position
    first: the crops must come out of one size); ``mirror`` an optional int8 tensor (N,)."""

    def __init__(self, color_space: str = "BGR", output_layout: str = "NCHW",
                 crop_h: int = 0, crop_w: int = 0, crop_pos_y: float = 0.5,
                 crop_pos_x: float = 0.5, mean: Sequence[float] = (0.0,),
                 std: Sequence[float] = (1.0,), output_dtype: dt.dtype = dt.float32) -> None:
        super().__init__()
        self.color_space, self.output_layout = check_color_space(color_space), output_layout
        self.crop_h, self.crop_w = int(crop_h), int(crop_w)
        self.crop_pos_y, self.crop_pos_x = float(crop_pos_y), float(crop_pos_x)
        self.mean, self.std, self.output_dtype = mean, std, output_dtype

    def _stack(self, buf: TensorBuffer) -> Tensor:
        crops = []
        for i, img in enumerate(_images(buf, "CropMirrorNormalize")):
            if img.dtype != np.uint8:
                raise TypeError(f"CropMirrorNormalize: image {i} is {img.dtype}, not uint8")
            H, W = img.shape[:2]
            h, w = self.crop_h or H, self.crop_w or W
            if h > H or w > W:
                raise ValueError(f"CropMirrorNormalize: crop {h}x{w} does not fit image {i} "
                                 f"of {H}x{W}")
            y0 = int((H - h) * np.float32(self.crop_pos_y))
            x0 = int((W - w) * np.float32(self.crop_pos_x))
            crops.append(img[y0:y0 + h, x0:x0 + w])
        if len({c.shape for c in crops}) > 1:
            raise ValueError(f"CropMirrorNormalize: the crops of a TensorBuffer must share one "
                             f"size (set crop_h and crop_w), got {[c.shape for c in crops]}")
        return _tensor(np.stack(crops), dtype=dt.uint8)

    def forward(self, input, mirror: Tensor | None = None) -> Tensor:
        crop = (self.crop_h, self.crop_w)
        if isinstance(input, TensorBuffer):
            input, crop = self._stack(input), (0, 0)
        elif not isinstance(input, Tensor) or input.dtype != dt.uint8:
            raise TypeError(f"CropMirrorNormalize: input must be a uint8 tensor (N, H, W, C) "
                            f"or a TensorBuffer of uint8 images, got "
                            f"{getattr(input, 'dtype', type(input).__name__)}")
        return crop_mirror_normalize(input, mirror, self.color_space, self.output_layout,
                                     crop[0], crop[1], self.crop_pos_y, self.crop_pos_x,
                                     self.mean, self.std, self.output_dtype)
