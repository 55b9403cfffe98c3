"""In-place random fills, as PyTorch's Tensor methods: ``uniform_``, ``normal_``,
``exponential_``, ``cauchy_``, ``log_normal_``, ``geometric_``, ``random_``, ``bernoulli_``.

Each draws with the random ops (``uniform``, ``normal``, ``randint``, ``bernoulli``: the
default generator, or ``generator``), maps uniform draws through the distribution's inverse
CDF with elementwise ops, and copies the result into the tensor without recording autograd.
Draws are float32, float64 for a float64 tensor; the copy casts to the tensor's dtype. A
global tensor's draws are global on its placement (``layout``): every rank draws the same
logical values with one agreed seed and keeps its shard, as ``flow.rand(placement=...)``.
"""
from __future__ import annotations

import math

from actorflow.autograd.grad_mode import no_grad
from actorflow.framework import dtype as dt
from actorflow.functional import creation
from actorflow.tensor import Tensor, register_tensor_methods


def _draw_dtype(t: Tensor) -> dt.dtype:
    return dt.float64 if t.dtype == dt.float64 else dt.float32


def layout(t: Tensor) -> dict:
    """The creation-op arguments that give a value laid out like ``t``: ``placement`` and
    ``sbp`` of a global ``t`` (partial sums as broadcast: the logical values), none for a
    local one."""
    if not t.is_global:
        return {}
    placement, sbp = creation._like_global(t)
    return {"placement": placement, "sbp": sbp}


def _uniform01(t: Tensor, generator) -> Tensor:
    return creation.rand(tuple(t.shape), dtype=_draw_dtype(t), generator=generator, **layout(t))


def _positive(name: str, **values) -> None:
    for key, v in values.items():
        if not v > 0:
            raise ValueError(f"{name}: {key} must be positive, got {v}")


def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill with values uniform in [a, b)."""
    a, b = float(a), float(b)
    if a > b:
        raise ValueError(f"uniform_: expected a <= b, got a={a}, b={b}")
    with no_grad():
        return self.copy_(_uniform01(self, generator) * (b - a) + a)


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with values from N(mean, std**2)."""
    if std < 0:
        raise ValueError(f"normal_: std must be non-negative, got {std}")
    with no_grad():
        z = creation.randn(tuple(self.shape), dtype=_draw_dtype(self), generator=generator,
                           **layout(self))
        return self.copy_(z * float(std) + float(mean))


def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with values from the exponential distribution of rate ``lambd``."""
    _positive("exponential_", lambd=lambd)
    with no_grad():
        u = _uniform01(self, generator)
        return self.copy_((1.0 - u).log() * (-1.0 / float(lambd)))


def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with values from the Cauchy distribution."""
    _positive("cauchy_", sigma=sigma)
    with no_grad():
        u = _uniform01(self, generator)
        return self.copy_(((u - 0.5) * math.pi).tan() * float(sigma) + float(median))


def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with ``exp(N(mean, std**2))`` values."""
    _positive("log_normal_", std=std)
    with no_grad():
        z = creation.randn(tuple(self.shape), dtype=_draw_dtype(self), generator=generator,
                           **layout(self))
        return self.copy_((z * float(std) + float(mean)).exp())


def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise ValueError(f"geometric_: p must be in (0, 1), got {p}")
    with no_grad():
        v = 1.0 - _uniform01(self, generator)  # (0, 1]
        k = (v.log() * (1.0 / math.log1p(-float(p)))).ceil().clamp(min=1.0)
        return self.copy_(k)


def _random_top(d: dt.dtype) -> int:
    """One past the largest integer ``random_()`` draws for dtype ``d`` (PyTorch's range)."""
    if d == dt.bool_:
        return 2
    if d.is_floating_point:
        bits = {dt.float16: 11, dt.bfloat16: 8, dt.float32: 24}.get(d, 53)
        return 2 ** bits + 1
    import numpy as np
    return int(np.iinfo(d.name).max) + (1 if d != dt.int64 else 0)


def random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator=None,
            **kwargs) -> Tensor:
    """Fill with integers uniform in [from, to) (``random_(to)``: [0, to); no bound: [0,
    the dtype's largest exactly representable integer])."""
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    if kwargs:
        raise TypeError(f"random_: unexpected arguments {sorted(kwargs)}")
    if to is None and from_ != 0:
        from_, to = 0, from_
    to = _random_top(self.dtype) if to is None else int(to)
    if int(from_) >= to:
        raise ValueError(f"random_: expected from < to, got from={from_}, to={to}")
    with no_grad():
        r = creation.randint(int(from_), to, tuple(self.shape), generator=generator,
                             dtype=dt.int64, **layout(self))
        return self.copy_(r)


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill with 0/1 draws, 1 with probability ``p`` (a number, or a tensor broadcast to the
    tensor's shape)."""
    with no_grad():
        if not isinstance(p, Tensor) and not 0 <= p <= 1:
            raise ValueError(f"bernoulli_: p must be in [0, 1], got {p}")
        if self.is_global:  # one agreed draw of the logical values (``layout``)
            return self.copy_(_uniform01(self, generator) < p)
        if isinstance(p, Tensor):
            probs = p.to(_draw_dtype(self)).expand(*self.shape).contiguous()
            return self.copy_(creation.bernoulli(probs, generator=generator))
        like = creation.zeros(tuple(self.shape), dtype=_draw_dtype(self))
        return self.copy_(creation.bernoulli(like, p=float(p), generator=generator))


_FILLS = {"uniform_": uniform_, "normal_": normal_, "exponential_": exponential_,
          "cauchy_": cauchy_, "log_normal_": log_normal_, "geometric_": geometric_,
          "random_": random_, "bernoulli_": bernoulli_}
register_tensor_methods(_FILLS)

# OneFlow's functional namespace has exponential_ (flow._C.exponential_); the rest are methods
__all__ = ["exponential_"]
