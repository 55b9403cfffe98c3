"""``flow.fft``: discrete Fourier transforms (``torch.fft`` names).

The functions are defined in ``actorflow.functional.fft`` over the ops of ``ops/fft.py``; this
module is the public namespace (``flow.fft.fft``, ``flow.fft.rfft2``, ...).
"""
from actorflow.functional.fft import (  # noqa: F401
    fft, fft2, fftfreq, fftn, fftshift, hfft, hfft2, hfftn, ifft, ifft2, ifftn, ifftshift, ihfft,
    ihfft2, ihfftn, irfft, irfft2, irfftn, rfft, rfft2, rfftfreq, rfftn,
)
from actorflow.functional.fft import PUBLIC as __all__  # noqa: F401
