"""Datasets: map-style (``__getitem__`` + ``__len__``) and iterable-style, and ways to combine
and split them."""
from __future__ import annotations

import bisect
import math
from typing import Iterable, Sequence

from actorflow.tensor import Tensor


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` (and usually ``__len__``).

    ``a + b`` concatenates two datasets.
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__``.

    With ``num_workers > 0`` every worker thread iterates its own ``iter(dataset)``; use
    ``get_worker_info()`` inside ``__iter__`` to give each worker a different shard.
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it can't be indexed")

    def __add__(self, other: "IterableDataset") -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; all tensors share their first dim."""

    def __init__(self, *tensors: Tensor):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: expected tensors, got {type(t).__name__}")
            if t.dim() == 0:
                raise ValueError("TensorDataset: tensors need at least one dimension")
        sizes = [t.shape[0] for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dimensions "
                             f"are {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after the other."""

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not support IterableDataset "
                                "(use ChainDataset)")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise IndexError(f"ConcatDataset: index {idx} out of range for length {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"ConcatDataset: index {idx} out of range for length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other."""

    def __init__(self, datasets: Iterable[IterableDataset]):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset: only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def _lengths_from_fractions(fractions: Sequence[float], n: int) -> list:
    if any(f < 0 or f > 1 for f in fractions):
        raise ValueError(f"random_split: fractions must lie in [0, 1], got {list(fractions)}")
    lengths = [int(math.floor(n * f)) for f in fractions]
    # the items left over by flooring go one each to the splits in turn
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    return lengths


def random_split(dataset: Dataset, lengths: Sequence, generator=None) -> list:
    """Split ``dataset`` at random into non-overlapping Subsets of the given lengths.

    ``lengths`` are ints summing to ``len(dataset)``, or fractions summing to 1. The permutation
    comes from ``generator`` (default: the global generator, so ``manual_seed`` makes it
    reproducible).
    """
    from actorflow.functional.creation import randperm

    n = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths must not be empty")
    if all(isinstance(x, int) for x in lengths):
        if any(x < 0 for x in lengths):
            raise ValueError(f"random_split: lengths must be non-negative, got {lengths}")
        if sum(lengths) != n:
            raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not "
                             f"equal the length of the dataset ({n})")
    elif math.isclose(sum(lengths), 1.0):
        lengths = _lengths_from_fractions(lengths, n)
    else:
        raise ValueError(f"random_split: lengths must be ints summing to {n} or fractions "
                         f"summing to 1, got {lengths}")
    perm = randperm(n, generator=generator).tolist()
    out = []
    offset = 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset:offset + length]))
        offset += length
    return out


__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset",
           "ChainDataset", "random_split"]
