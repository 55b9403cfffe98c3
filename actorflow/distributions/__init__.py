"""``flow.distributions``: probability distributions (``Distribution``, ``Categorical``)."""
from actorflow.distributions.categorical import Categorical
from actorflow.distributions.distribution import Distribution

__all__ = ["Distribution", "Categorical"]
