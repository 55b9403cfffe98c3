"""``Categorical``: a distribution over ``{0, ..., K-1}`` given by probabilities or logits
(PyTorch's and OneFlow's API). Sampling inverts the cumulative distribution of uniform draws
from ``flow.rand``, so ``flow.manual_seed`` makes it reproducible."""
from __future__ import annotations

import numpy as np

from actorflow import functional as F
from actorflow.distributions.distribution import Distribution, _as_size
from actorflow.framework import dtype as dt
from actorflow.framework.type_info import finfo
from actorflow.tensor import Size, Tensor

__all__ = ["Categorical"]


class Categorical(Distribution):
    """A categorical distribution over the last dim of ``probs`` (non-negative, finite, with
    a non-zero sum; normalised to sum to 1) or ``logits`` (unnormalised log-probabilities;
    normalised with logsumexp). Exactly one of them is given; leading dims are the batch."""

    has_enumerate_support = True

    def __init__(self, probs: Tensor | None = None, logits: Tensor | None = None,
                 validate_args: bool | None = None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: either `probs` or `logits` must be specified, but "
                             "not both")
        param = probs if probs is not None else logits
        name = "probs" if probs is not None else "logits"
        if not isinstance(param, Tensor):
            raise TypeError(f"Categorical: {name} must be a Tensor, got "
                            f"{type(param).__name__}")
        if param.dim() < 1:
            raise ValueError(f"Categorical: `{name}` must be at least one-dimensional, got "
                             f"shape {tuple(param.shape)}")
        if not param.dtype.is_floating_point:
            raise TypeError(f"Categorical: {name} must be floating point, got {param.dtype}")
        super().__init__(param.shape[:-1], (), validate_args)
        if probs is not None:
            if self._validate_args:
                a = probs.detach().numpy()
                if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a.sum(-1) <= 0):
                    raise ValueError("Categorical: probs must be non-negative and finite, with "
                                     "a positive sum along the last dim")
            self._probs = probs / probs.sum(-1, keepdim=True)
            self._logits = None
        else:
            if self._validate_args and np.any(np.isnan(logits.detach().numpy())):
                raise ValueError("Categorical: logits must not be NaN")
            self._logits = logits - F.logsumexp(logits, -1, keepdim=True)
            self._probs = None
        self._num_events = int(param.shape[-1])

    @property
    def probs(self) -> Tensor:
        """The normalised event probabilities."""
        if self._probs is None:
            self._probs = F.softmax(self._logits, -1)
        return self._probs

    @property
    def logits(self) -> Tensor:
        """The normalised log-probabilities (from probs: their log, clamped to [eps, 1-eps])."""
        if self._logits is None:
            eps = finfo(self._probs.dtype).eps
            self._logits = F.log(F.clamp(self._probs, min=eps, max=1 - eps))
        return self._logits

    @property
    def param_shape(self) -> Size:
        """The shape of ``probs`` / ``logits``."""
        return Size(tuple(self._batch_shape) + (self._num_events,))

    @property
    def mean(self) -> Tensor:
        """Undefined for a categorical: NaN, as in PyTorch."""
        return F.full(tuple(self._batch_shape), float("nan"), dtype=self.probs.dtype)

    @property
    def variance(self) -> Tensor:
        """Undefined for a categorical: NaN, as in PyTorch."""
        return self.mean

    @property
    def mode(self) -> Tensor:
        """The most probable category."""
        return F.argmax(self.probs, -1)

    def sample(self, sample_shape=()) -> Tensor:
        """int64 samples of shape ``sample_shape + batch_shape``."""
        shape = _as_size(sample_shape)
        n = int(np.prod(tuple(shape), dtype=np.int64))
        with_no_grad = self.probs.detach().to(dt.float64)
        probs_2d = with_no_grad.reshape(-1, self._num_events)
        cdf = F.cumsum(probs_2d, -1)
        u = F.rand(probs_2d.shape[0], n, dtype=dt.float64) * cdf[:, -1:]
        idx = F.clamp(F.searchsorted(cdf, u, right=True), max=self._num_events - 1)
        return idx.transpose(0, 1).reshape(self._extended_shape(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        """``log P(value)``; ``value`` holds categories, broadcast against the batch."""
        if not isinstance(value, Tensor):
            value = F.tensor(value)
        if self._validate_args:
            a = value.numpy()
            if np.any(a != np.floor(a)) or np.any(a < 0) or np.any(a >= self._num_events):
                raise ValueError(f"Categorical.log_prob: value must hold integers in [0, "
                                 f"{self._num_events}), got {a.tolist()}")
        value = value.to(dt.int64).unsqueeze(-1)
        value, log_pmf = F.broadcast_tensors(value, self.logits)
        return F.gather(log_pmf, -1, value[..., :1]).squeeze(-1)

    def entropy(self) -> Tensor:
        """``-sum(p log p)`` over the categories (0 log 0 counts as 0)."""
        logits = F.clamp(self.logits, min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """``0..K-1`` along a new leading dim (expanded over the batch with ``expand``)."""
        values = F.arange(self._num_events, dtype=dt.int64)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
