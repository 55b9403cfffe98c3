"""``Distribution``: the base class of ``flow.distributions`` (PyTorch's and OneFlow's API).

A distribution has a ``batch_shape`` (independent distributions side by side) and an
``event_shape`` (the shape of one draw). Subclasses implement ``sample``, ``log_prob``,
``entropy`` and the moments they have; the base class raises NotImplementedError naming the
class for what a subclass does not define.
"""
from __future__ import annotations

from actorflow.functional import exp
from actorflow.tensor import Size, Tensor

__all__ = ["Distribution"]


def _as_size(shape) -> Size:
    if isinstance(shape, Size):
        return shape
    if isinstance(shape, int):
        return Size((shape,))
    return Size(tuple(int(s) for s in shape))


class Distribution:
    """A probability distribution with ``batch_shape`` and ``event_shape``.

    ``validate_args`` (default True, as PyTorch under ``__debug__``) makes subclasses check
    their parameters and the values given to ``log_prob``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_default = True

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Whether new distributions validate their arguments by default."""
        if value not in (True, False):
            raise ValueError("set_default_validate_args: expected True or False")
        Distribution._validate_default = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args: bool | None = None):
        self._batch_shape = _as_size(batch_shape)
        self._event_shape = _as_size(event_shape)
        self._validate_args = (Distribution._validate_default if validate_args is None
                               else bool(validate_args))

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    def _extended_shape(self, sample_shape=()) -> Size:
        """``sample_shape + batch_shape + event_shape``."""
        return Size(tuple(_as_size(sample_shape)) + tuple(self._batch_shape)
                    + tuple(self._event_shape))

    def _missing(self, what: str):
        return NotImplementedError(f"{type(self).__name__} does not implement {what}")

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise self._missing("mean")

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise self._missing("mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise self._missing("variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: the square root of ``variance``."""
        return self.variance.sqrt()

    @property
    def support(self):
        """The set of values the distribution takes."""
        raise self._missing("support")

    def sample(self, sample_shape=()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape`` (no gradient)."""
        raise self._missing("sample")

    def rsample(self, sample_shape=()) -> Tensor:
        """A reparameterised (differentiable) sample."""
        raise self._missing("rsample (it has no reparameterised sampling)")

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples: ``sample((n,))``."""
        return self.sample((n,))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability (density or mass) of ``value``."""
        raise self._missing("log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise self._missing("cdf")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise self._missing("icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution's support, along a new leading dim."""
        raise self._missing("enumerate_support")

    def entropy(self) -> Tensor:
        """The entropy, one value per batch entry."""
        raise self._missing("entropy")

    def perplexity(self) -> Tensor:
        """``exp(entropy())``."""
        return exp(self.entropy())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_shape={tuple(self._batch_shape)}, " \
               f"event_shape={tuple(self._event_shape)})"
