"""PixelShuffle / PixelUnshuffle and the channel dropouts Dropout1d/2d/3d."""
from __future__ import annotations

from actorflow.nn import functional as F
from actorflow.nn.module import Module
from actorflow.tensor import Tensor


class PixelShuffle(Module):
    """(N, C*h*w, H, W) -> (N, C, H*h, W*w); ``upscale_factor`` sets h = w (OneFlow also takes
    ``h_upscale_factor`` and ``w_upscale_factor``)."""

    def __init__(self, upscale_factor: int | None = None, h_upscale_factor: int | None = None,
                 w_upscale_factor: int | None = None) -> None:
        super().__init__()
        if upscale_factor is not None:
            h_upscale_factor = w_upscale_factor = upscale_factor
        if h_upscale_factor is None or w_upscale_factor is None:
            raise ValueError("PixelShuffle: give upscale_factor or both h_upscale_factor and "
                             "w_upscale_factor")
        self.h_upscale_factor = int(h_upscale_factor)
        self.w_upscale_factor = int(w_upscale_factor)

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, h_upscale_factor=self.h_upscale_factor,
                               w_upscale_factor=self.w_upscale_factor)

    def extra_repr(self) -> str:
        return f"h_upscale_factor={self.h_upscale_factor}, w_upscale_factor={self.w_upscale_factor}"


class PixelUnshuffle(Module):
    """(N, C, H*r, W*r) -> (N, C*r*r, H, W)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = int(downscale_factor)

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class _DropoutNd(Module):
    _fn = None

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) input with probability ``p`` while training."""

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) input with probability ``p`` while training."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) input with probability ``p`` while training."""

    _fn = staticmethod(F.dropout3d)
