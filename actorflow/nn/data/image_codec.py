"""Decoding encoded images (the bytes of a PNG or JPEG file) into HWC arrays, as OpenCV's
``imdecode`` gives them to OneFlow's decoders, and encoding PNG.

PNG is decoded here with ``zlib`` and NumPy (bit depths 1-16, grey, RGB, palette, with or
without alpha, non-interlaced). Every other format (JPEG, interlaced PNG, BMP...) needs
Pillow, imported only when such an image arrives: ``pip install actorflow[image]``.

Output channels follow ``color_space``: ``"BGR"`` (OpenCV's order, the default), ``"RGB"``
(3 channels) or ``"GRAY"`` (1 channel; luma ``0.299 R + 0.587 G + 0.114 B``, rounded). Alpha
is dropped. 16-bit samples become 8-bit as ``v >> 8``.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["decode_image", "encode_png", "convert_color", "COLOR_SPACES"]

COLOR_SPACES = ("BGR", "RGB", "GRAY")
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def channels_of(color_space: str) -> int:
    """3 for a colour space, 1 for ``GRAY``."""
    cs = check_color_space(color_space)
    return 1 if cs == "GRAY" else 3


def check_color_space(color_space: str) -> str:
    cs = str(color_space).upper()
    if cs not in COLOR_SPACES:
        raise ValueError(f"image decode: color_space must be one of {COLOR_SPACES}, got "
                         f"{color_space!r}")
    return cs


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    """Undo PNG's per-row filters (None, Sub, Up, Average, Paeth)."""
    rows = np.frombuffer(raw, np.uint8)
    if rows.size != height * (stride + 1):
        raise ValueError(f"PNG: image data holds {rows.size} bytes, expected "
                         f"{height * (stride + 1)}")
    rows = rows.reshape(height, stride + 1)
    if not rows[:, 0].any():                        # every row unfiltered
        return rows[:, 1:].copy()
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for y in range(height):
        ftype, line = rows[y, 0], rows[y, 1:]
        if ftype == 0:
            cur = line
        elif ftype == 2:
            cur = line + prev                       # uint8 arithmetic wraps mod 256
        elif ftype == 1:                            # a running sum per byte lane
            lanes = np.zeros(-(-stride // bpp) * bpp, np.uint64)
            lanes[:stride] = line
            cur = (np.cumsum(lanes.reshape(-1, bpp), axis=0) & 0xFF).reshape(-1)[:stride]
            cur = cur.astype(np.uint8)
        elif ftype in (3, 4):                       # sequential: plain Python ints
            c, up = line.tolist(), prev.tolist()
            for x in range(stride):
                a = c[x - bpp] if x >= bpp else 0
                if ftype == 3:
                    p = (a + up[x]) >> 1
                else:
                    b, d = up[x], up[x - bpp] if x >= bpp else 0
                    pa, pb, pc = abs(b - d), abs(a - d), abs(a + b - 2 * d)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else d)
                c[x] = (c[x] + p) & 0xFF
            cur = np.array(c, np.uint8)
        else:
            raise ValueError(f"PNG: unknown filter type {ftype} in row {y}")
        out[y] = cur
        prev = out[y]
    return out


def _decode_png(data: bytes):
    """(array HxWxC in RGB(A) / grey order, uint8 or uint16), or None for PNGs this decoder
    does not take (interlaced)."""
    pos, chunks, header, palette, trns = 8, [], None, None, None
    while pos + 8 <= len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("PNG: truncated chunk")
        if ctype == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif ctype == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif ctype == b"tRNS":
            trns = body
        elif ctype == b"IDAT":
            chunks.append(body)
        elif ctype == b"IEND":
            break
        pos += 12 + length
    if header is None:
        raise ValueError("PNG: no IHDR chunk")
    w, h, depth, ctype, _, _, interlace = header
    if interlace:
        return None
    if ctype not in _CHANNELS or depth not in (1, 2, 4, 8, 16):
        raise ValueError(f"PNG: unsupported colour type {ctype} / bit depth {depth}")
    ch = _CHANNELS[ctype]
    bits = depth * ch
    stride = (w * bits + 7) // 8
    rows = _unfilter(zlib.decompress(b"".join(chunks)), h, stride, max(1, bits // 8))
    if depth == 16:
        img = rows.view(">u2").reshape(h, w, ch).astype(np.uint16)
    elif depth == 8:
        img = rows.reshape(h, w, ch)
    else:                               # 1, 2, 4 bits: one channel, packed
        bitsarr = np.unpackbits(rows, axis=1).reshape(h, -1, depth)[:, :w]
        weights = (1 << np.arange(depth - 1, -1, -1)).astype(np.uint8)
        img = (bitsarr * weights).sum(axis=2).astype(np.uint8)[..., None]
        if ctype == 0:                  # scale grey to 8 bits
            img = (img.astype(np.uint16) * 255 // ((1 << depth) - 1)).astype(np.uint8)
    if ctype == 3:
        if palette is None:
            raise ValueError("PNG: a palette image without PLTE")
        img = palette[img[..., 0]]
    del trns                            # transparency is dropped with alpha
    return img


def _decode_pillow(data: bytes) -> np.ndarray:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("image decode: this image (JPEG or another format than "
                          "non-interlaced PNG) needs Pillow: pip install actorflow[image]"
                          ) from None
    import io
    with Image.open(io.BytesIO(data)) as im:
        if im.mode in ("I;16", "I;16B", "I"):
            a = np.asarray(im).astype(np.uint16)[..., None]
        elif im.mode in ("L", "RGB"):
            a = np.asarray(im)
        else:
            a = np.asarray(im.convert("RGBA" if "A" in im.mode or im.mode == "P" else "RGB"))
    return a if a.ndim == 3 else a[..., None]


def convert_color(img: np.ndarray, src: str, dst: str) -> np.ndarray:
    """``img`` (H, W, C) from colour space ``src`` (``RGB``, ``BGR`` or ``GRAY``) to
    ``dst``; uint8 stays uint8 (grey rounded), floats stay floats."""
    src, dst = check_color_space(src), check_color_space(dst)
    if src == dst:
        return img
    if src == "GRAY":
        return np.repeat(img[..., :1], 3, axis=2)
    rgb = img if src == "RGB" else img[..., ::-1]
    if dst != "GRAY":
        return np.ascontiguousarray(rgb[..., ::-1])
    y = rgb[..., 0:1] * 0.299 + rgb[..., 1:2] * 0.587 + rgb[..., 2:3] * 0.114
    return np.rint(y).astype(img.dtype) if img.dtype.kind in "ui" else y.astype(img.dtype)


def decode_image(data, color_space: str = "BGR") -> np.ndarray:
    """The (H, W, C) uint8 array of the encoded image ``data`` (bytes or a uint8/int8
    array), channels in ``color_space`` (see the module docstring)."""
    cs = check_color_space(color_space)
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    if not raw:
        raise ValueError("image decode: empty image bytes")
    img = _decode_png(raw) if raw.startswith(_PNG_SIG) else None
    if img is None:
        img = _decode_pillow(raw)
    if img.dtype == np.uint16:
        img = (img >> 8).astype(np.uint8)
    if img.shape[2] in (2, 4):          # drop alpha
        img = img[..., :-1]
    src = "GRAY" if img.shape[2] == 1 else "RGB"
    return np.ascontiguousarray(convert_color(img, src, cs))


def _chunk(ctype: bytes, body: bytes) -> bytes:
    return (struct.pack(">I", len(body)) + ctype + body
            + struct.pack(">I", zlib.crc32(ctype + body) & 0xFFFFFFFF))


def encode_png(img: np.ndarray, color_space: str = "BGR") -> bytes:
    """The PNG file of ``img``: (H, W) or (H, W, 1) grey, or (H, W, 3) in ``color_space``
    order; uint8 (8-bit) or uint16 (16-bit) samples."""
    a = np.asarray(img)
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] not in (1, 3) or a.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"encode_png: expected (H, W[, 1 or 3]) uint8 or uint16, got shape "
                         f"{a.shape} {a.dtype}")
    if a.shape[2] == 3 and check_color_space(color_space) == "BGR":
        a = a[..., ::-1]
    h, w, c = a.shape
    depth = 16 if a.dtype == np.uint16 else 8
    rows = a.astype(">u2" if depth == 16 else np.uint8).reshape(h, -1).view(np.uint8)
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rows], axis=1).tobytes()
    head = struct.pack(">IIBBBBB", w, h, depth, 0 if c == 1 else 2, 0, 0, 0)
    return (_PNG_SIG + _chunk(b"IHDR", head) + _chunk(b"IDAT", zlib.compress(raw))
            + _chunk(b"IEND", b""))
