"""Random crop windows of OneFlow's image decoders (``RandomCropGenerator``): the
Inception-style crop of a random area fraction and aspect ratio, tried ``num_attempts``
times before a fallback that fits the ratio range."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["RandomCropGenerator", "crop_seed"]


def crop_seed(seed: int, index: int) -> int:
    """The seed of batch slot ``index``'s generator, derived from the module's ``seed``."""
    return int(np.random.SeedSequence([int(seed) % 2**63, index]).generate_state(1,
                                                                                np.uint64)[0])


class RandomCropGenerator:
    """Draws crop windows ``(y, x, h, w)`` for images of a given size."""

    def __init__(self, aspect_ratio_range, area_range, seed: int, num_attempts: int = 10):
        lo_r, hi_r = (float(v) for v in aspect_ratio_range)
        lo_a, hi_a = (float(v) for v in area_range)
        if not 0 < lo_r <= hi_r:
            raise ValueError(f"random crop: random_aspect_ratio must be 0 < min <= max, got "
                             f"{tuple(aspect_ratio_range)}")
        if not 0 < lo_a <= hi_a <= 1:
            raise ValueError(f"random crop: random_area must be 0 < min <= max <= 1, got "
                             f"{tuple(area_range)}")
        if num_attempts < 1:
            raise ValueError(f"random crop: num_attempts must be >= 1, got {num_attempts}")
        self.ratio, self.area, self.num_attempts = (lo_r, hi_r), (lo_a, hi_a), num_attempts
        self.rng = np.random.Generator(np.random.MT19937(seed))

    def _shape(self, H: int, W: int) -> tuple:
        (min_r, max_r), (min_a, max_a) = self.ratio, self.area
        max_w = max(1, int(H * max_r))
        max_h = max(1, int(W / min_r))
        min_area = W * H * min_a
        if H * max_w < min_area:
            return H, max_w
        if W * max_h < min_area:
            return max_h, W
        for _ in range(self.num_attempts):
            target = self.rng.uniform(min_a, max_a) * H * W
            ratio = math.exp(self.rng.uniform(math.log(min_r), math.log(max_r)))
            w = max(1, int(round(math.sqrt(target * ratio))))
            h = max(1, int(round(math.sqrt(target / ratio))))
            if w <= W and h <= H and min_r <= w / h <= max_r:
                return h, w
        ratio = W / H
        h, w = (H, max_w) if ratio > max_r else (max_h, W) if ratio < min_r else (H, W)
        scale = min(1.0, max_a * W * H / (h * w))
        return max(1, int(h * math.sqrt(scale))), max(1, int(w * math.sqrt(scale)))

    def window(self, H: int, W: int) -> tuple:
        """A window ``(y, x, h, w)`` inside an ``H`` x ``W`` image."""
        if H <= 0 or W <= 0:
            return 0, 0, H, W
        h, w = self._shape(H, W)
        h, w = min(h, H), min(w, W)
        y = int(self.rng.integers(0, H - h + 1))
        x = int(self.rng.integers(0, W - w + 1))
        return y, x, h, w
