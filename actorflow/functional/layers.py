"""Layer functions built as composites of registered ops (OneFlow / ``torch.nn.functional``
names): transposed convolutions, pixel shuffle, instance and RMS normalisation, dropout over
channels, affine grids.

Each is a composite whose gradients come from the ops it is made of, so it runs eagerly,
inside a Graph trace and under double backward without an op of its own.
"""
from __future__ import annotations

from actorflow.autograd import no_grad
from actorflow.functional.conv import _GRAD_INPUT, _attrs, check_conv_args, ntuple
from actorflow.functional._base import replicated_like
from actorflow.functional.activation import rsqrt
from actorflow.functional.elementwise import mul
from actorflow.functional.reduce import mean
from actorflow.functional.shape import permute, reshape
from actorflow.dispatch import apply
from actorflow.tensor import Tensor


# ---- transposed convolution -------------------------------------------------------------------

def _conv_transpose(n: int, input, weight, bias, stride, padding, output_padding, groups,
                    dilation) -> Tensor:
    name = f"conv_transpose{n}d"
    check_conv_args(name, n, input, weight)
    unbatched = len(input._shape) == n + 1
    if unbatched:
        input = reshape(input, (1,) + tuple(input._shape))
    if len(input._shape) != n + 2:
        raise ValueError(f"{name}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(input._shape)}")
    groups = int(groups)
    stride = ntuple(stride, n, "stride", name)
    pad = ntuple(padding, n, "padding", name)
    out_pad = ntuple(output_padding, n, "output_padding", name)
    dilation = ntuple(dilation, n, "dilation", name)
    if any(op >= max(s, d) for op, s, d in zip(out_pad, stride, dilation)):
        raise ValueError(f"{name}: output_padding {out_pad} must be smaller than either "
                         f"stride {stride} or dilation {dilation}")
    c_in = weight._shape[0]
    if input._shape[1] != c_in:
        raise ValueError(f"{name}: input has {input._shape[1]} channels but the weight of shape "
                         f"{tuple(weight._shape)} expects {c_in}")
    spatial = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in zip(
        input._shape[2:], stride, pad, dilation, weight._shape[2:], out_pad))
    if any(o < 0 for o in spatial) or (input._shape[0] and any(o == 0 for o in spatial)):
        raise ValueError(f"{name}: output size {spatial} is not positive (input shape "
                         f"{tuple(input._shape)}, weight shape {tuple(weight._shape)})")
    out_shape = (input._shape[0], weight._shape[1] * groups) + spatial
    attrs = _attrs(stride, tuple((p, p) for p in pad), dilation, groups,
                   input_shape=out_shape)
    # the transposed convolution is the gradient of a convolution with respect to its input
    out = apply(_GRAD_INPUT[n], [input, weight], attrs)[0]
    if bias is not None:
        out = out + reshape(bias, (-1,) + (1,) * n)
    return reshape(out, tuple(out._shape[1:])) if unbatched else out


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-d transposed convolution; ``weight`` is (C_in, C_out/groups, k)."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-d transposed convolution; ``weight`` is (C_in, C_out/groups, kH, kW)."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-d transposed convolution; ``weight`` is (C_in, C_out/groups, kD, kH, kW)."""
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# ---- pixel shuffle ----------------------------------------------------------------------------

def pixel_shuffle(input: Tensor, upscale_factor: int | None = None, *,
                  h_upscale_factor: int | None = None,
                  w_upscale_factor: int | None = None) -> Tensor:
    """(N, C*h*w, H, W) -> (N, C, H*h, W*w); ``upscale_factor`` sets h = w."""
    if upscale_factor is not None:
        h_upscale_factor = w_upscale_factor = upscale_factor
    if h_upscale_factor is None or w_upscale_factor is None:
        raise ValueError("pixel_shuffle: give upscale_factor or both h_upscale_factor and "
                         "w_upscale_factor")
    h, w = int(h_upscale_factor), int(w_upscale_factor)
    if h <= 0 or w <= 0:
        raise ValueError(f"pixel_shuffle: upscale factors must be positive, got ({h}, {w})")
    shape = tuple(input._shape)
    if len(shape) < 3:
        raise ValueError(f"pixel_shuffle: expected at least 3 dims, got shape {shape}")
    *lead, c, hh, ww = shape
    if c % (h * w):
        raise ValueError(f"pixel_shuffle: {c} channels are not divisible by the upscale "
                         f"factors {h} * {w} (input shape {shape})")
    k = len(lead)
    x = reshape(input, tuple(lead) + (c // (h * w), h, w, hh, ww))
    order = tuple(range(k + 1)) + (k + 3, k + 1, k + 4, k + 2)
    return reshape(permute(x, order), tuple(lead) + (c // (h * w), hh * h, ww * w))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(N, C, H*r, W*r) -> (N, C*r*r, H, W): the inverse of ``pixel_shuffle``."""
    r = int(downscale_factor)
    shape = tuple(input._shape)
    if len(shape) < 3 or shape[-1] % r or shape[-2] % r:
        raise ValueError(f"pixel_unshuffle: the last two dims of shape {shape} must be "
                         f"divisible by downscale_factor {r}")
    *lead, c, hh, ww = shape
    k = len(lead)
    x = reshape(input, tuple(lead) + (c, hh // r, r, ww // r, r))
    order = tuple(range(k + 1)) + (k + 2, k + 4, k + 1, k + 3)
    return reshape(permute(x, order), tuple(lead) + (c * r * r, hh // r, ww // r))


# ---- normalisation ----------------------------------------------------------------------------

def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float = 1e-6) -> Tensor:
    """``input / sqrt(mean(input**2 over normalized_shape) + eps) * weight``."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = tuple(int(s) for s in normalized_shape)
    if tuple(input._shape[len(input._shape) - len(shape):]) != shape:
        raise ValueError(f"rms_norm: normalized_shape {shape} does not match the trailing dims "
                         f"of the input shape {tuple(input._shape)}")
    dims = tuple(range(len(input._shape) - len(shape), len(input._shape)))
    y = mul(input, rsqrt(mean(input * input, dim=dims, keepdim=True) + float(eps)))
    return y if weight is None else y * weight


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each (sample, channel) over its spatial dims; with ``use_input_stats`` the
    running statistics (if given) are updated with the batch mean of the instance statistics,
    else they normalise."""
    from actorflow.functional.normalization import batch_norm, group_norm

    if len(input._shape) < 3:
        raise ValueError(f"instance_norm: expected an input with a batch, a channel and spatial "
                         f"dims, got shape {tuple(input._shape)}")
    c = input._shape[1]
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and "
                             "running_var")
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    y = group_norm(input, c, weight, bias, eps)
    if running_mean is not None and running_var is not None:
        with no_grad():
            dims = tuple(range(2, len(input._shape)))
            x = input.detach()
            m = float(momentum)
            inst_mean = x.mean(dim=dims).mean(dim=0).to(running_mean.dtype)
            inst_var = x.var(dim=dims, unbiased=True).mean(dim=0).to(running_var.dtype)
            running_mean.mul_(1 - m).add_(inst_mean * m)
            running_var.mul_(1 - m).add_(inst_var * m)
    return y


# ---- dropout over whole channels ----------------------------------------------------------------

def _channel_dropout(name: str, input: Tensor, p: float, training: bool, batched_dims: int,
                     generator=None) -> Tensor:
    """Dropout with one mask entry per (sample, channel) of a ``batched_dims``-d input; any
    other input counts as unbatched, its channels along dim 0 (PyTorch's rule)."""
    from actorflow.functional.creation import ones
    from actorflow.functional.nn_ops import dropout

    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    nd = len(input._shape)
    lead = 2 if nd == batched_dims else 1
    mask_shape = tuple(input._shape[:lead]) + (1,) * (nd - lead)
    mask = dropout(ones(mask_shape, dtype=input.dtype), p, True, generator=generator)
    return input * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) / (C, L) input with probability ``p``."""
    return _channel_dropout("dropout1d", input, p, training, 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) / (C, H, W) input with probability ``p``."""
    return _channel_dropout("dropout2d", input, p, training, 4)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) / (C, D, H, W) input with probability ``p``."""
    return _channel_dropout("dropout3d", input, p, training, 5)


# ---- affine grid ------------------------------------------------------------------------------

def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    from actorflow.functional.creation import linspace

    if n == 1:
        return linspace(-1.0, 1.0, 1, dtype=like.dtype) * 0.0
    c = linspace(-1.0, 1.0, n, dtype=like.dtype)
    return c if align_corners else c * ((n - 1) / n)


def affine_grid(theta: Tensor, size, align_corners: bool = False) -> Tensor:
    """Sampling grid (N, H, W, 2) or (N, D, H, W, 3) of the affine maps ``theta`` (N, 2, 3)
    or (N, 3, 4), in normalised [-1, 1] coordinates (x first)."""
    from actorflow.functional.creation import ones
    from actorflow.functional.elementwise import broadcast_to
    from actorflow.functional.linalg import matmul
    from actorflow.functional.shape import cat

    size = tuple(int(s) for s in size)
    if len(size) == 4:
        if tuple(theta._shape[1:]) != (2, 3) or theta._shape[0] != size[0]:
            raise ValueError(f"affine_grid: expected theta of shape ({size[0]}, 2, 3) for size "
                             f"{size}, got {tuple(theta._shape)}")
        n, _, h, w = size
        xs = reshape(_base_coords(w, align_corners, theta), (1, w, 1))
        ys = reshape(_base_coords(h, align_corners, theta), (h, 1, 1))
        parts = [broadcast_to(xs, (h, w, 1)), broadcast_to(ys, (h, w, 1)),
                 ones((h, w, 1), dtype=theta.dtype)]
        base = replicated_like(reshape(cat(parts, dim=2), (1, h * w, 3)), theta)
        grid = matmul(broadcast_to(base, (n, h * w, 3)), permute(theta, (0, 2, 1)))
        return reshape(grid, (n, h, w, 2))
    if len(size) == 5:
        if tuple(theta._shape[1:]) != (3, 4) or theta._shape[0] != size[0]:
            raise ValueError(f"affine_grid: expected theta of shape ({size[0]}, 3, 4) for size "
                             f"{size}, got {tuple(theta._shape)}")
        n, _, d, h, w = size
        xs = reshape(_base_coords(w, align_corners, theta), (1, 1, w, 1))
        ys = reshape(_base_coords(h, align_corners, theta), (1, h, 1, 1))
        zs = reshape(_base_coords(d, align_corners, theta), (d, 1, 1, 1))
        full = (d, h, w, 1)
        parts = [broadcast_to(xs, full), broadcast_to(ys, full), broadcast_to(zs, full),
                 ones(full, dtype=theta.dtype)]
        base = replicated_like(reshape(cat(parts, dim=3), (1, d * h * w, 4)), theta)
        grid = matmul(broadcast_to(base, (n, d * h * w, 4)), permute(theta, (0, 2, 1)))
        return reshape(grid, (n, d, h, w, 3))
    raise ValueError(f"affine_grid: size must have 4 or 5 entries, got {size}")


__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "pixel_shuffle",
           "pixel_unshuffle", "rms_norm", "instance_norm", "dropout1d", "dropout2d", "dropout3d",
           "affine_grid"]
