"""``stft``: the short-time Fourier transform (OneFlow's signature; PyTorch's semantics), as a
composition of functional ops: padding, framing (``unfold``), windowing and a batched
``rfft`` / ``fft`` over the frames; its gradient comes from those ops' rules."""
from __future__ import annotations

import math

from actorflow.functional.creation import ones
from actorflow.functional.fft import fft, rfft
from actorflow.functional.rearrange import pad
from actorflow.functional.shape import stack
from actorflow.functional.special import imag, real
from actorflow.tensor import Tensor, register_tensor_methods

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _positive(name: str, value, what: str) -> None:
    if value <= 0:
        raise RuntimeError(f"stft: Expected {what}, but got {name}={value}")


def stft(input: Tensor, n_fft: int, hop_length: int | None = None,
         win_length: int | None = None, window: Tensor | None = None, center: bool = True,
         pad_mode: str = "reflect", normalized: bool = False, onesided: bool | None = None,
         return_complex: bool = False) -> Tensor:
    """The STFT of a signal (1-d, or 2-d: a batch of signals): frames of ``n_fft`` samples
    every ``hop_length`` (default ``n_fft // 4``), each multiplied by ``window`` (default
    ones of ``win_length``, default ``n_fft``; a shorter window is centred, zero-padded to
    ``n_fft``) and Fourier-transformed. ``center`` pads the signal by ``n_fft // 2`` on both
    sides with ``pad_mode``; ``normalized`` scales by ``n_fft ** -0.5``; ``onesided`` (default
    for a real signal and window) keeps the ``n_fft // 2 + 1`` non-negative frequencies.
    Returns (batch?, freq, frames): complex, or with a last dim of 2 (real, imaginary) when
    ``return_complex`` is False."""
    if not isinstance(input, Tensor) or input.ndim not in (1, 2):
        got = input.ndim if isinstance(input, Tensor) else type(input).__name__
        raise RuntimeError(f"stft: Expected a 1D or 2D tensor,but got {got}D")
    if n_fft <= 0 or (not center and n_fft > input.shape[-1]):
        raise RuntimeError(f"stft: Expected 0 < n_fft <= {input.shape[-1]}, but got "
                           f"n_fft={n_fft}")
    hop = n_fft // 4 if hop_length is None else hop_length
    _positive("hop_length", hop, "hop_length > 0")
    win = n_fft if win_length is None else win_length
    if win <= 0 or win > n_fft:
        raise RuntimeError(f"stft: Expected 0 < win_length <=n_fft ,but got "
                           f"win_length={win}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win):
        raise RuntimeError(f"stft: Expected a 1D window tensor of size equal to "
                           f"win_length={win}, but got window with size "
                           f"{tuple(window.shape)}")
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"stft: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
    is_complex = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if onesided is None:
        onesided = not is_complex
    elif onesided and is_complex:
        raise RuntimeError("stft: a complex input or window has no one-sided spectrum; pass "
                           "onesided=False")
    batched = input.ndim == 2
    x = input if batched else input.unsqueeze(0)
    if center:
        half = n_fft // 2
        if pad_mode == "reflect" and half >= x.shape[-1]:
            raise RuntimeError(f"stft: reflect padding by {half} needs a signal longer than "
                               f"that, got length {x.shape[-1]}")
        x = pad(x.unsqueeze(1), (half, half), mode=pad_mode).squeeze(1)
    if x.shape[-1] < n_fft:
        raise RuntimeError(f"stft: Expected 0 < n_fft <= {x.shape[-1]}, but got n_fft={n_fft}")
    if window is None:
        window = ones(win, dtype=x.dtype if x.dtype.is_floating_point else None)
    if win < n_fft:
        left = (n_fft - win) // 2
        window = pad(window, (left, n_fft - win - left))
    frames = x.unfold(-1, n_fft, hop) * window  # (batch, n_frames, n_fft)
    spec = rfft(frames, dim=-1) if onesided else fft(frames, dim=-1)
    if normalized:
        spec = spec * (1.0 / math.sqrt(n_fft))
    spec = spec.transpose(-2, -1)  # (batch, freq, n_frames)
    if not batched:
        spec = spec.squeeze(0)
    if return_complex:
        return spec
    return stack([real(spec), imag(spec)], -1)


register_tensor_methods({"stft": stft})

__all__ = ["stft"]
