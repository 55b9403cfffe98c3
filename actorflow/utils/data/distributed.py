"""``DistributedSampler``: each process of a data-parallel program reads its own share of a
map-style dataset (PyTorch's ``torch.utils.data.distributed``)."""
from __future__ import annotations

import math
from typing import Iterator, Sized

from actorflow.process.world import world
from actorflow.utils.data.sampler import Sampler


class DistributedSampler(Sampler):
    """The indices rank ``rank`` of ``num_replicas`` reads (defaults: this process's rank and
    the world size). Every rank orders ``0 .. len(dataset) - 1`` the same way (a permutation
    seeded by ``seed + epoch`` when ``shuffle``), pads it by repeating its start to a multiple
    of ``num_replicas`` (or, with ``drop_last``, cuts the tail) and takes every
    ``num_replicas``-th index from ``rank``. Call ``set_epoch(e)`` before each epoch for a new
    order."""

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if num_replicas is None:
            num_replicas = world().size
        if rank is None:
            rank = world().rank
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got "
                             f"{num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the "
                             f"interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            from actorflow.functional.creation import randperm
            from actorflow.random import Generator

            g = Generator(self.seed + self.epoch)
            order = randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        if self.drop_last:
            order = order[:self.total_size]
        else:
            pad = self.total_size - len(order)
            if pad and order:
                order += (order * math.ceil(pad / len(order)))[:pad]
        return iter(order[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next ``__iter__`` orders the dataset for (with ``shuffle``)."""
        self.epoch = int(epoch)


__all__ = ["DistributedSampler"]
