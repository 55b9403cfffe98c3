"""Resampling layers: ``Upsample`` and the fixed-mode ``UpsamplingNearest2d`` /
``UpsamplingBilinear2d`` (``F.interpolate``)."""
from __future__ import annotations

from actorflow.functional.interpolate import interpolate
from actorflow.nn.module import Module
from actorflow.tensor import Tensor

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resample (N, C, *spatial) inputs to ``size`` or by ``scale_factor`` with ``mode``
    (nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area), as
    ``F.interpolate``."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = (tuple(float(f) for f in scale_factor)
                             if isinstance(scale_factor, (tuple, list))
                             else float(scale_factor) if scale_factor else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """2-d nearest-neighbour resampling of (N, C, H, W) inputs."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-d bilinear resampling of (N, C, H, W) inputs with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
