"""OneFlow's ``nn.CoinFlip`` (after DALI's): a batch of Bernoulli draws as int8."""
from __future__ import annotations

from actorflow.framework import dtype as dt
from actorflow.framework.device import as_device
from actorflow.functional.creation import bernoulli, full, rand
from actorflow.nn.module import Module
from actorflow.random import Generator
from actorflow.tensor import Tensor

__all__ = ["CoinFlip"]


class CoinFlip(Module):
    """Each call returns ``batch_size`` int8 values, 1 with probability ``probability``,
    drawn from the global generator or, with ``random_seed``, from the module's own (seeded
    as ``Generator.manual_seed``: a negative seed counts modulo 2**64). With ``placement``
    and ``sbp`` the batch is a global tensor of ``batch_size`` logical values."""

    def __init__(self, batch_size: int = 1, random_seed: int | None = None,
                 probability: float = 0.5, device=None, placement=None, sbp=None) -> None:
        super().__init__()
        if batch_size < 0:
            raise ValueError(f"CoinFlip: batch_size must be non-negative, got {batch_size}")
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"CoinFlip: probability must be in [0, 1], got {probability}")
        if (placement is None) != (sbp is None):
            raise ValueError("CoinFlip: placement and sbp go together")
        self.batch_size = batch_size
        self.probability = probability
        self.placement, self.sbp = placement, sbp
        self.device = as_device(device)  # raises for a device without kernels (cuda)
        self.generator = None
        if random_seed is not None:
            self.generator = Generator()
            self.generator.manual_seed(int(random_seed))

    def forward(self) -> Tensor:
        if self.placement is not None:
            # batch_size is the logical size: one draw every rank agrees on (the seeded
            # generator, or an agreed seed), of which each rank keeps its shard
            u = rand(self.batch_size, generator=self.generator, placement=self.placement,
                     sbp=self.sbp)
            return (u < float(self.probability)).to(dt.int8)
        p = full((self.batch_size,), float(self.probability), dtype=dt.float32)
        return bernoulli(p, generator=self.generator, dtype=dt.int8)
