"""``grid_sample``: sample a (N, C, H, W) or (N, C, D, H, W) input at the normalised [-1, 1]
positions of a grid (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3), x first.

A composite of registered ops: coordinates are unnormalised and folded by the padding mode
(zeros, border, reflection), the taps of each output position (nearest: 1, bilinear: 2 per
dim, bicubic (4-d only): 4 per dim) are gathered from the flattened input and combined with
their weights. Gradients w.r.t. the input come from the gather, w.r.t. the grid from the
weights (the tap positions themselves are piecewise constant), as in PyTorch.
"""
from __future__ import annotations

import itertools

from actorflow.tensor import Tensor

_A = -0.75  # the cubic convolution coefficient PyTorch and OneFlow use


def _unnormalize(g: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (g + 1) * ((size - 1) / 2)
    return ((g + 1) * size - 1) / 2


def _reflect(x: Tensor, twice_low: int, twice_high: int) -> Tensor:
    from actorflow.functional.activation import abs as abs_
    from actorflow.functional.activation import floor
    from actorflow.functional.elementwise import fmod, where

    if twice_low == twice_high:
        return x * 0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    x = abs_(x - low)
    extra = fmod(x, span)
    flips = floor(x / span)
    even = fmod(flips, 2) == 0
    return where(even, extra + low, span - extra + low)


def _fold(x: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Apply the padding mode to pixel coordinates along a dim of ``size`` positions."""
    if padding_mode == "border":
        return x.clamp(0, size - 1)
    if padding_mode == "reflection":
        if align_corners:
            x = _reflect(x, 0, 2 * (size - 1))
        else:
            x = _reflect(x, -1, 2 * size - 1)
        return x.clamp(0, size - 1)
    return x


def _gather_taps(flat: Tensor, spatial: tuple, taps: list) -> Tensor:
    """Values of ``flat`` (N, C, prod(spatial)) at integer tap positions ``taps`` (one
    (N, P) float tensor per spatial dim, outermost first), zero outside the input."""
    from actorflow.functional.index import gather

    N, C = flat._shape[:2]
    inside = None
    index = None
    for pos, size in zip(taps, spatial):
        ok = (pos >= 0) & (pos <= size - 1)
        inside = ok if inside is None else inside & ok
        clipped = pos.clamp(0, size - 1)
        index = clipped if index is None else index * size + clipped
    index = index.to(_int64()).reshape(N, 1, -1)
    P = index._shape[2]
    values = gather(flat, 2, index.expand(N, C, P))
    return values * inside.to(flat.dtype).reshape(N, 1, P)


def _int64():
    from actorflow.framework.dtype import int64
    return int64


def _cubic_weights(t: Tensor) -> list:
    a = _A
    t1, u, u1 = t + 1, 1 - t, 2 - t
    return [((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * u - (a + 3)) * u * u + 1,
            ((a * u1 - 5 * a) * u1 + 8 * a) * u1 - 4 * a]


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Sample ``input`` at the grid positions (see the module docstring)."""
    from actorflow.functional.activation import floor
    from actorflow.functional.activation import round as round_

    nd = len(input._shape) - 2
    if nd not in (2, 3) or len(grid._shape) != nd + 2 or grid._shape[-1] != nd \
            or grid._shape[0] != input._shape[0]:
        raise ValueError(f"grid_sample: expected a 4-d input with a (N, H, W, 2) grid or a 5-d "
                         f"input with a (N, D, H, W, 3) grid, got input {tuple(input._shape)} "
                         f"and grid {tuple(grid._shape)}")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got "
                         f"{mode!r}")
    if mode == "bicubic" and nd != 2:
        raise ValueError("grid_sample: mode='bicubic' needs a 4-d input")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', "
                         f"got {padding_mode!r}")
    if grid.dtype is not input.dtype:
        grid = grid.to(input.dtype)
    N, C = input._shape[:2]
    spatial = tuple(input._shape[2:])
    out_spatial = tuple(grid._shape[1:-1])
    flat = input.reshape(N, C, -1)
    g = grid.reshape(N, -1, nd)
    # coordinates per spatial dim, outermost first (the grid lists x = innermost first)
    coords = [_unnormalize(g[:, :, nd - 1 - k], spatial[k], align_corners) for k in range(nd)]
    if mode == "bicubic":
        out = _bicubic(flat, spatial, coords, padding_mode, align_corners)
    else:
        coords = [_fold(c, s, padding_mode, align_corners) for c, s in zip(coords, spatial)]
        if mode == "nearest":
            out = _gather_taps(flat, spatial, [round_(c).detach() for c in coords])
        else:
            lows = [floor(c).detach() for c in coords]
            fracs = [c - lo for c, lo in zip(coords, lows)]
            out = None
            for corner in itertools.product((0, 1), repeat=nd):
                taps = [lo + b for lo, b in zip(lows, corner)]
                w = None
                for fr, b in zip(fracs, corner):
                    wk = fr if b else 1 - fr
                    w = wk if w is None else w * wk
                term = _gather_taps(flat, spatial, taps) * w.reshape(N, 1, -1)
                out = term if out is None else out + term
    return out.reshape((N, C) + out_spatial)


def _bicubic(flat, spatial, coords, padding_mode, align_corners):
    from actorflow.functional.activation import floor

    N = flat._shape[0]
    (y, x), (H, W) = coords, spatial
    y0, x0 = floor(y).detach(), floor(x).detach()
    wy, wx = _cubic_weights(y - y0), _cubic_weights(x - x0)
    out = None
    for i in range(4):
        ty = _fold(y0 + (i - 1), H, padding_mode, align_corners)
        for j in range(4):
            tx = _fold(x0 + (j - 1), W, padding_mode, align_corners)
            term = _gather_taps(flat, spatial, [ty.detach(), tx.detach()]) \
                * (wy[i] * wx[j]).reshape(N, 1, -1)
            out = term if out is None else out + term
    return out


__all__ = ["grid_sample"]
