"""``flow.special``: special functions (OneFlow's ``oneflow.special``, ``torch.special`` names).

Each name forwards to the functional op of the same meaning (``flow.special.erf`` is
``flow.erf``); the few that are not ops of their own (``ndtr``, ``sinc``, ``logit``...) are
compositions of functional ops, so their gradients come from those ops' rules.
"""
from __future__ import annotations

import math

from actorflow.functional.activation import (  # noqa: F401
    erf, erfc, exp2, expm1, log1p, round, sigmoid,
)
from actorflow.functional import elementwise as _ew
from actorflow.functional import activation as _act
from actorflow.functional.nn_ops import log_softmax as _log_softmax
from actorflow.functional.nn_ops import softmax as _softmax
from actorflow.functional.reduce import logsumexp  # noqa: F401
from actorflow.functional.special import digamma, erfinv, lgamma, polygamma, zeta  # noqa: F401
from actorflow.tensor import Tensor

psi = digamma
gammaln = lgamma
expit = sigmoid


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; ``dtype`` casts the input first."""
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """``x - logsumexp(x, dim)`` along ``dim``; ``dtype`` casts the input first."""
    return _log_softmax(input, dim, dtype=dtype)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal distribution function ``(1 + erf(x / sqrt(2))) / 2``, as
    ``erfc(-x / sqrt(2)) / 2`` (accurate in the lower tail)."""
    return _ew.mul(erfc(_ew.mul(input, -1.0 / math.sqrt(2.0))), 0.5)


def sinc(input: Tensor) -> Tensor:
    """The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0 (gradient 0 there)."""
    zero = _ew.eq(input, 0)
    safe = _ew.where(zero, 1.0, input)  # keeps 0/0 out of the gradient too
    px = _ew.mul(safe, math.pi)
    return _ew.where(zero, 1.0, _ew.div(_act.sin(px), px))


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``; with ``eps`` the input is clamped to ``[eps, 1 - eps]`` first."""
    if eps is not None:
        input = _ew.clamp(input, eps, 1.0 - eps)
    return _act.log(_ew.div(input, _ew.sub(1.0, input)))


__all__ = ["erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "log_softmax", "logsumexp",
           "round", "softmax", "digamma", "psi", "zeta", "gammaln", "polygamma", "expit",
           "ndtr", "sinc", "logit"]
