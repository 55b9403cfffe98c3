"""The ``flow.fft`` functions (``torch.fft`` names and semantics) over the three DFT ops of
``ops/fft.py``.

Each function canonicalises ``n``/``s`` and ``dim`` as PyTorch does (``s`` without ``dim``: the
last ``len(s)`` dims; an entry -1: the input's size), promotes integer inputs to the default
float dtype and real inputs of complex-only transforms to complex, crops or zero-pads the input
to the signal sizes (``pad``, whose gradient crops back) and conjugates where the transform asks
(``ifft`` of a real input, ``hfft``, ``ihfft``). ``norm``: ``"backward"`` (default: the inverse
divides by n), ``"forward"`` (the forward divides by n) or ``"ortho"`` (both by sqrt(n)).
The public functions live in ``actorflow.fft`` (``flow.fft.fft``); this module's ``__all__``
holds only the op wrappers the gradient rules call.
"""
from __future__ import annotations

from typing import Sequence

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.functional.creation import arange
from actorflow.functional.elementwise import cast, div
from actorflow.functional.rearrange import pad, roll
from actorflow.functional.shape import cat
from actorflow.functional.special import conj
from actorflow.ops import registry
from actorflow.ops.fft import complex_of
from actorflow.tensor import Tensor

_c2c, _r2c, _c2r = registry.get("fft_c2c"), registry.get("fft_r2c"), registry.get("fft_c2r")


def fft_c2c(x: Tensor, dims: Sequence[int], norm: str, forward: bool) -> Tensor:
    """Complex-to-complex DFT over ``dims`` (``norm``: 'none', 'sqrt' or 'n')."""
    return apply(_c2c, [x], {"dims": tuple(dims), "norm": norm, "forward": bool(forward)})[0]


def fft_r2c(x: Tensor, dims: Sequence[int], norm: str, onesided: bool) -> Tensor:
    """Real-to-complex forward DFT over ``dims``; ``onesided`` halves the last one."""
    return apply(_r2c, [x], {"dims": tuple(dims), "norm": norm, "onesided": bool(onesided)})[0]


def fft_c2r(x: Tensor, dims: Sequence[int], norm: str, last_dim_size: int) -> Tensor:
    """One-sided complex-to-real inverse DFT over ``dims``; the last becomes
    ``last_dim_size``."""
    return apply(_c2r, [x], {"dims": tuple(dims), "norm": norm,
                             "last_dim_size": int(last_dim_size)})[0]


def _norm(name: str, norm, forward: bool) -> str:
    """The op's norm attr for the user's ``norm`` of a transform in that direction."""
    if norm is None or norm == "backward":
        return "none" if forward else "n"
    if norm == "forward":
        return "n" if forward else "none"
    if norm == "ortho":
        return "sqrt"
    raise ValueError(f"fft.{name}: invalid normalization mode {norm!r} (expected 'backward', "
                     "'forward' or 'ortho')")


def _promote(name: str, x: Tensor, require_complex: bool = False) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"fft.{name}: expected a Tensor, got {type(x).__name__}")
    d = x.dtype
    if d in (dt.float16, dt.bfloat16):
        raise TypeError(f"fft.{name}: {d} is not supported on the CPU (shape "
                        f"{tuple(x._shape)}); use float32 or float64")
    if not d.is_floating_point and not d.is_complex:
        x = cast(x, dt.get_default_dtype())
    if require_complex and not x.dtype.is_complex:
        x = cast(x, complex_of(x.dtype))
    return x


def _dims_and_sizes(name: str, x: Tensor, s, dim) -> tuple[list[int], list[int]]:
    """PyTorch's canonical (dims, signal sizes) for ``s`` and ``dim`` (None: all dims)."""
    nd = len(x._shape)
    if isinstance(dim, int):
        dim = [dim]
    if isinstance(s, int):
        s = [s]
    if dim is not None:
        dims = []
        for d in dim:
            if not -nd <= d < nd:
                raise IndexError(f"fft.{name}: dim {d} out of range for a {nd}-D input "
                                 f"(shape {tuple(x._shape)})")
            dims.append(d % nd)
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"fft.{name}: dims must be unique, got {list(dim)}")
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"fft.{name}: s ({list(s)}) and dim ({list(dim)}) must have "
                               "the same length")
    elif s is not None:
        if len(s) > nd:
            raise RuntimeError(f"fft.{name}: got s of {len(s)} dims for a {nd}-D input")
        dims = list(range(nd - len(s), nd))
    else:
        dims = list(range(nd))
    if s is None:
        sizes = [x._shape[d] for d in dims]
    else:
        sizes = [x._shape[d] if int(n) == -1 else int(n) for d, n in zip(dims, s)]
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"fft.{name}: invalid number of data points ({n}) specified "
                               f"(input shape {tuple(x._shape)}, dims {dims})")
    return dims, sizes


def _resize(x: Tensor, dims: list[int], sizes: list[int]) -> Tensor:
    """``x`` cropped or zero-padded at the end of each of ``dims`` to ``sizes``."""
    if all(x._shape[d] == n for d, n in zip(dims, sizes)):
        return x
    nd = len(x._shape)
    pads = [0] * (2 * (nd - min(dims)))
    for d, n in zip(dims, sizes):
        pads[2 * (nd - 1 - d) + 1] = n - x._shape[d]
    return pad(x, pads)


def _c2c_or_r2c(name: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    x = _promote(name, x)
    dims, sizes = _dims_and_sizes(name, x, s, dim)
    if not dims:  # nothing to transform (PyTorch: the input as a complex tensor)
        return x if x.dtype.is_complex else cast(x, complex_of(x.dtype))
    x = _resize(x, dims, sizes)
    mode = _norm(name, norm, forward)
    if x.dtype.is_complex:
        return fft_c2c(x, dims, mode, forward)
    y = fft_r2c(x, dims, mode, False)
    return y if forward else conj(y)


def _r2c_onesided(name: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    if isinstance(x, Tensor) and x.dtype.is_complex:
        raise TypeError(f"fft.{name} expects a real input tensor, got {x.dtype} "
                        f"(shape {tuple(x._shape)})")
    x = _promote(name, x)
    dims, sizes = _dims_and_sizes(name, x, s, dim)
    if not dims:
        raise RuntimeError(f"fft.{name} must transform at least one axis")
    y = fft_r2c(_resize(x, dims, sizes), dims, _norm(name, norm, forward), True)
    return y if forward else conj(y)


def _hermitian(name: str, x: Tensor, s, dim, norm, forward: bool) -> Tensor:
    x = _promote(name, x, require_complex=True)
    if isinstance(s, int):
        s = [s]
    dims, sizes = _dims_and_sizes(name, x, s, dim)
    if not dims:
        raise RuntimeError(f"fft.{name} must transform at least one axis")
    last = dims[-1]
    n = 2 * (x._shape[last] - 1) if s is None or int(s[-1]) == -1 else int(s[-1])
    if n < 1:
        raise RuntimeError(f"fft.{name}: invalid number of data points ({n}) specified "
                           f"(input shape {tuple(x._shape)}, dim {last})")
    sizes[-1] = n // 2 + 1
    x = _resize(x, dims, sizes)
    if forward:  # hfft: the forward transform of a Hermitian signal
        x = conj(x)
    return fft_c2r(x, dims, _norm(name, norm, forward), n)


def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D discrete Fourier transform of ``input`` along ``dim``."""
    return _c2c_or_r2c("fft", input, None if n is None else [n], [dim], norm, True)


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D inverse discrete Fourier transform along ``dim``."""
    return _c2c_or_r2c("ifft", input, None if n is None else [n], [dim], norm, False)


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D DFT of a real input: the ``n // 2 + 1`` non-negative frequencies."""
    return _r2c_onesided("rfft", input, None if n is None else [n], [dim], norm, True)


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    return _hermitian("irfft", input, None if n is None else [n], [dim], norm, False)


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-D DFT of a Hermitian-symmetric signal given by its first half: a real result."""
    return _hermitian("hfft", input, None if n is None else [n], [dim], norm, True)


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of ``hfft``: the first half of the inverse DFT of a real input."""
    return _r2c_onesided("ihfft", input, None if n is None else [n], [dim], norm, False)


def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D DFT over ``dim``."""
    return _c2c_or_r2c("fft2", input, s, dim, norm, True)


def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D inverse DFT over ``dim``."""
    return _c2c_or_r2c("ifft2", input, s, dim, norm, False)


def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D DFT of a real input, one-sided in the last dim."""
    return _r2c_onesided("rfft2", input, s, dim, norm, True)


def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of ``rfft2``."""
    return _hermitian("irfft2", input, s, dim, norm, False)


def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The 2-D DFT of a Hermitian signal given by its one-sided half: a real result."""
    return _hermitian("hfft2", input, s, dim, norm, True)


def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of ``hfft2``."""
    return _r2c_onesided("ihfft2", input, s, dim, norm, False)


def fftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D DFT over ``dim`` (default: the last ``len(s)`` dims, or all)."""
    return _c2c_or_r2c("fftn", input, s, dim, norm, True)


def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D inverse DFT."""
    return _c2c_or_r2c("ifftn", input, s, dim, norm, False)


def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D DFT of a real input, one-sided in the last transformed dim."""
    return _r2c_onesided("rfftn", input, s, dim, norm, True)


def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of ``rfftn``."""
    return _hermitian("irfftn", input, s, dim, norm, False)


def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The N-D DFT of a Hermitian signal given by its one-sided half: a real result."""
    return _hermitian("hfftn", input, s, dim, norm, True)


def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None) -> Tensor:
    """The inverse of ``hfftn``."""
    return _r2c_onesided("ihfftn", input, s, dim, norm, False)


def fftfreq(n: int, d: float = 1.0, *, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point ``fft`` with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    n = int(n)
    if n < 1:
        raise RuntimeError(f"fft.fftfreq: n must be positive, got {n}")
    k = cat([arange(0, (n - 1) // 2 + 1), arange(-(n // 2), 0)])
    return _freqs(k, n * float(d), dtype, device, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point ``rfft``: ``[0, 1, ..., n // 2] / (d * n)``."""
    n = int(n)
    if n < 1:
        raise RuntimeError(f"fft.rfftfreq: n must be positive, got {n}")
    return _freqs(arange(0, n // 2 + 1), n * float(d), dtype, device, requires_grad)


def _freqs(k: Tensor, scale: float, dtype, device, requires_grad: bool) -> Tensor:
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    out = cast(div(cast(k, dt.float64), scale), d).to(device=device)
    return out.requires_grad_(True) if requires_grad else out


def _shift(x: Tensor, dim, sign: int) -> Tensor:
    nd = len(x._shape)
    dims = list(range(nd)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d % nd for d in dims] if nd else []
    if not dims:
        return x
    return roll(x, [sign * (x._shape[d] // 2) for d in dims], dims)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """``input`` with the zero frequency moved to the centre of each of ``dim`` (default
    all): a roll by ``n // 2``."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of ``fftshift``: a roll by ``-(n // 2)``."""
    return _shift(input, dim, -1)


PUBLIC = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
          "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
          "rfftfreq", "fftshift", "ifftshift"]
__all__ = ["fft_c2c", "fft_r2c", "fft_c2r"]
