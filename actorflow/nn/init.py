"""Parameter initialisation (``actorflow.nn.init``).

Each function fills a tensor in place (``tensor.copy_``) under ``no_grad`` with values drawn by
the creation ops (``flow.rand``, ``flow.randn``) from the global generator, so
``flow.manual_seed`` makes initialisation reproducible. They return the tensor. The uniform and
normal fills (``uniform_``, ``normal_`` and the xavier/kaiming forms) are the Tensor methods
(``actorflow.functional.random_fill``). A global tensor is filled with global values on its
placement (``random_fill.layout``): the same logical values on every rank, each keeping its
shard.
"""
from __future__ import annotations

import math

import numpy as np

import actorflow.functional as F
from actorflow.autograd import no_grad
from actorflow.framework import dtype as dt
from actorflow.framework.sbp_parallel import SbpParallel
from actorflow.functional.random_fill import layout
from actorflow.tensor import Tensor

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for an initialisation followed by ``nonlinearity``."""
    if nonlinearity in _LINEAR_LIKE:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    """``(fan_in, fan_out)`` of a weight shaped ``(out, in, *kernel)``."""
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for a tensor with fewer than 2 "
                         f"dimensions (shape {tuple(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn uniformly from ``[a, b)`` (``Tensor.uniform_``)."""
    return tensor.uniform_(float(a), float(b), generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from ``N(mean, std**2)`` (``Tensor.normal_``)."""
    return tensor.normal_(float(mean), float(std), generator=generator)


def _erfinv(y: Tensor) -> Tensor:
    """Inverse error function for ``|y| < 1`` (float64): Winitzki's closed-form estimate, then
    Newton steps on ``F.erf`` (there is no ``erfinv`` op; the result is exact to ~1e-15)."""
    a = 0.147
    ln = F.log(1.0 - y * y)
    t = 2.0 / (math.pi * a) + ln * 0.5
    x = F.sign(y) * F.sqrt(F.sqrt(t * t - ln * (1.0 / a)) - t)
    for _ in range(3):
        x = x - (F.erf(x) - y) / (F.exp(-(x * x)) * (2.0 / math.sqrt(math.pi)))
    return x


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with ``N(mean, std**2)`` values truncated to ``[a, b]`` (inverse-CDF sampling)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")

    def cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with no_grad():
        u = F.rand(tuple(tensor.shape), dtype=dt.float64, generator=generator,
                   **layout(tensor))
        u = u * (2 * hi - 2 * lo) + (2 * lo - 1)  # uniform in [2 lo - 1, 2 hi - 1)
        u = F.clamp(u, min=-1 + 1e-15, max=1 - 1e-15)
        x = _erfinv(u) * (std * math.sqrt(2.0)) + mean
        return tensor.copy_(F.clamp(x, min=a, max=b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with no_grad():
        return tensor.copy_(F.full(tuple(tensor.shape), val, dtype=tensor.dtype,
                                   **layout(tensor)))


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    with no_grad():
        return tensor.copy_(F.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype,
                                  **layout(tensor)))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: ``N(0, std**2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    fan = _calculate_correct_fan(tensor, mode)
    if fan == 0:
        raise ValueError(f"kaiming init: can't initialise a tensor with a zero {mode} "
                         f"(shape {tuple(tensor.shape)})")
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: ``U(-bound, bound)`` with ``bound = gain * sqrt(3 / fan)``."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: ``N(0, std**2)`` with ``std = gain / sqrt(fan)``."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def _broadcast_on(t: Tensor) -> dict:
    """Creation-op arguments for a broadcast value on a global ``t``'s placement (none for a
    local ``t``)."""
    if not t.is_global:
        return {}
    return {"placement": t.placement,
            "sbp": (SbpParallel.from_attr(("B",)),) * len(t.placement.hierarchy)}


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix, as PyTorch: the Q of the QR decomposition of a
    standard normal ``(rows, numel // rows)`` matrix, column signs fixed by R's diagonal, times
    ``gain``. Needs at least 2 dimensions."""
    if tensor.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got shape {tuple(tensor.shape)}")
    rows = tensor.shape[0]
    cols = tensor.numel() // rows if rows else 0
    if tensor.numel() == 0:
        return tensor
    with no_grad():
        z = F.randn((rows, cols), dtype=dt.float64, generator=generator,
                    **_broadcast_on(tensor)).numpy()  # the logical values, on every rank
        # no QR op: initialisation runs eagerly, so the decomposition is NumPy's, on the host
        q, r = np.linalg.qr(z.T if rows < cols else z)
        q = q * np.sign(np.diag(r))
        q = q.T if rows < cols else q
        values = F.tensor(np.ascontiguousarray(q).reshape(tuple(tensor.shape)) * gain,
                          dtype=dt.float64, **layout(tensor))
        return tensor.copy_(values)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_"]
