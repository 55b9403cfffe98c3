"""``actorflow.nn.utils.rnn``: variable-length sequences for the recurrent layers.

A :class:`PackedSequence` holds a batch of sequences of different lengths without padding:
``data`` stacks, time step by time step, the entries of the sequences still running at that step
(longest sequence first), and ``batch_sizes[t]`` says how many there are. ``RNN``, ``LSTM`` and
``GRU`` accept one and return one. Semantics and names are PyTorch's and OneFlow's.

Every conversion here is one ``index_select`` over the concatenated data (plus a row holding the
padding value), so gradients flow back through the ordinary gather gradient.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from actorflow import functional as flow
from actorflow.framework import dtype as dt
from actorflow.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """A batch of variable-length sequences, packed: ``(data, batch_sizes, sorted_indices,
    unsorted_indices)``. Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`.

    ``sorted_indices[i]`` is the batch position (in the caller's order) of the i-th longest
    sequence, ``unsorted_indices`` its inverse; both are None when the batch was given sorted.
    """

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None, unsorted_indices: Tensor | None = None):
        if batch_sizes is None:  # PackedSequence((data, batch_sizes, ...)) as in PyTorch
            if not isinstance(data, (tuple, list)):
                raise TypeError("PackedSequence: give data and batch_sizes")
            return cls(*data)
        if not isinstance(data, Tensor) or not isinstance(batch_sizes, Tensor):
            raise TypeError(f"PackedSequence: data and batch_sizes must be tensors, got "
                            f"{type(data).__name__} and {type(batch_sizes).__name__}")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> "PackedSequence":
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(*args, **kwargs)``; the index tensors keep their integer dtype."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self) -> "PackedSequence":
        """Already on the CPU: the same sequence."""
        return self

    def double(self) -> "PackedSequence":
        return self.to(dtype=dt.float64)

    def float(self) -> "PackedSequence":
        return self.to(dtype=dt.float32)

    def half(self) -> "PackedSequence":
        return self.to(dtype=dt.float16)

    def long(self) -> "PackedSequence":
        return self.to(dtype=dt.int64)

    def int(self) -> "PackedSequence":
        return self.to(dtype=dt.int32)

    def short(self) -> "PackedSequence":
        return self.to(dtype=dt.int16)

    def char(self) -> "PackedSequence":
        return self.to(dtype=dt.int8)

    def byte(self) -> "PackedSequence":
        return self.to(dtype=dt.uint8)

    @property
    def is_cuda(self) -> bool:
        """False: the data lives on the CPU."""
        return False

    def is_pinned(self) -> bool:
        """Whether ``data`` is in pinned memory: never without a GPU."""
        return self.data.is_pinned()


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation given as an int64 tensor (None stays None)."""
    if permutation is None:
        return None
    p = permutation.numpy().astype(np.int64)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=np.int64)
    return flow.tensor(inv)


def _lengths_array(lengths, batch: int, steps: int) -> np.ndarray:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1:
            raise ValueError(f"pack_padded_sequence: lengths must be 1-d, got shape "
                             f"{tuple(lengths.shape)}")
        arr = lengths.numpy()
    else:
        arr = np.asarray(list(lengths))
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(arr == np.floor(arr)):
            raise ValueError(f"pack_padded_sequence: lengths must be integers, got {arr}")
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size != batch:
        raise ValueError(f"pack_padded_sequence: expected {batch} lengths (the batch size), "
                         f"got {arr.size}")
    if batch and arr.min() <= 0:
        raise RuntimeError("pack_padded_sequence: the length of every sequence has to be "
                           f"greater than 0, got {arr.tolist()}")
    if batch and arr.max() > steps:
        raise RuntimeError(f"pack_padded_sequence: a length ({arr.max()}) exceeds the input's "
                           f"{steps} time steps")
    return arr


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``input`` ((T, B, *), or (B, T, *) with ``batch_first``) whose
    sequence ``b`` has ``lengths[b]`` valid steps. With ``enforce_sorted`` the lengths must be
    non-increasing; otherwise the batch is sorted (stably, longest first) and the permutation
    kept in the result so that unpacking restores the caller's order."""
    if not isinstance(input, Tensor) or input.dim() < 2:
        raise ValueError("pack_padded_sequence: input must be a tensor of at least 2 dims, "
                         f"got {getattr(input, 'shape', type(input).__name__)}")
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    if batch == 0:
        raise RuntimeError("pack_padded_sequence: cannot pack an empty batch")
    lens = _lengths_array(lengths, batch, steps)
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise RuntimeError(f"pack_padded_sequence: lengths {lens.tolist()} must be sorted in "
                               "decreasing order when enforce_sorted is True (pass "
                               "enforce_sorted=False for an unsorted batch)")
        order = np.arange(batch)
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        sorted_indices = flow.tensor(order.astype(np.int64))
    sorted_lens = lens[order]
    batch_sizes = np.array([(sorted_lens > t).sum() for t in range(int(sorted_lens[0]))],
                           dtype=np.int64)
    # packed row -> row of input flattened over its first two dims
    rows = [(order[b] * steps + t) if batch_first else (t * batch + order[b])
            for t, n in enumerate(batch_sizes) for b in range(n)]
    flat = input.reshape((steps * batch,) + tuple(input.shape[2:]))
    data = flow.index_select(flat, 0, flow.tensor(np.asarray(rows, dtype=np.int64)))
    return PackedSequence(data, flow.tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: ``(padded, lengths)``, the batch in the caller's
    order, padded with ``padding_value`` to ``total_length`` steps (default: the longest)."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got "
                        f"{type(sequence).__name__}")
    sizes = sequence.batch_sizes.numpy().astype(np.int64)
    steps = sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"pad_packed_sequence: expected total_length to be at least the "
                             f"length of the longest sequence ({steps}), got {total_length}")
        steps = int(total_length)
    batch = int(sizes[0])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    sorted_lens = np.array([(sizes > b).sum() for b in range(batch)], dtype=np.int64)
    unsorted = (np.arange(batch) if sequence.unsorted_indices is None
                else sequence.unsorted_indices.numpy().astype(np.int64))
    pad_row = int(sizes.sum())
    index = np.full((steps, batch), pad_row, dtype=np.int64)  # [t, caller's b]
    for j in range(batch):
        b = unsorted[j]
        t = np.arange(sorted_lens[b])
        index[t, j] = offsets[t] + b
    if batch_first:
        index = index.T
    data = sequence.data
    trailing = tuple(data.shape[1:])
    source = flow.cat([data, flow.full((1,) + trailing, padding_value, dtype=data.dtype)], 0)
    padded = flow.index_select(source, 0, flow.tensor(index.reshape(-1)))
    return padded.reshape(index.shape + trailing), flow.tensor(sorted_lens[unsorted])


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack tensors of shapes (L_i, *) into (L_max, B, *) (or (B, L_max, *) with
    ``batch_first``), filling the missing steps with ``padding_value`` on ``padding_side``."""
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got "
                         f"{padding_side!r}")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.dim() < 1 or tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: every sequence must have shape (L, "
                               f"{', '.join(map(str, trailing))}); sequence {i} has "
                               f"{tuple(getattr(s, 'shape', ()))}")
    lens = [int(s.shape[0]) for s in sequences]
    steps, batch = max(lens), len(sequences)
    pad_row = sum(lens)
    index = np.full((steps, batch), pad_row, dtype=np.int64)
    start = 0
    for b, n in enumerate(lens):
        first = steps - n if padding_side == "left" else 0
        index[first:first + n, b] = np.arange(start, start + n)
        start += n
    if batch_first:
        index = index.T
    pad = flow.full((1,) + trailing, padding_value, dtype=sequences[0].dtype)
    source = flow.cat(sequences + [pad], 0)
    return flow.index_select(source, 0, flow.tensor(index.reshape(-1))).reshape(
        index.shape + trailing)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The list of sequences ``padded_sequences`` holds, sequence ``b`` cut to ``lengths[b]``."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    lens = lengths.numpy().tolist() if isinstance(lengths, Tensor) else list(lengths)
    if len(lens) != x.shape[0]:
        raise ValueError(f"unpad_sequence: got {len(lens)} lengths for a batch of {x.shape[0]}")
    return [x[b, :int(n)] for b, n in enumerate(lens)]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors (L_i, *) (longest first with ``enforce_sorted``)."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of tensors :func:`pack_sequence` packed, in the caller's order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
