"""OneFlow's OFRecord data pipeline: record files, ``nn.OFRecordReader`` and the decoders.

An OFRecord part file is a sequence of records, each an int64 length (little-endian, as
OneFlow writes it on x86) followed by that many bytes of a serialized ``OFRecord`` protobuf
message (``protowire.py``); there is no checksum. A dataset is ``data_part_num`` part files in
one directory named ``part_name_prefix`` + the part number, zero-padded to
``part_name_suffix_length`` digits (no padding when it is -1): ``part-00000``, ...

The reader yields ``OFRecordBatch`` values (``batch_size`` parsed records); the decoders turn
one feature of each record into a tensor (``OFRecordRawDecoder``) or a ``TensorBuffer`` of
per-record arrays (bytes, decoded images). All of it runs on the host, eagerly: a Graph trace
cannot hold it (``OFRecordReader`` raises inside ``nn.Graph.build``).
"""
from __future__ import annotations

import os
import struct
from typing import Iterable, Iterator, Sequence

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.functional.creation import tensor as _tensor
from actorflow.nn.data.image_codec import check_color_space, decode_image
from actorflow.nn.data.protowire import Feature, decode_record, encode_record
from actorflow.nn.data.random_crop import RandomCropGenerator, crop_seed
from actorflow.nn.data.tensor_buffer import TensorBuffer
from actorflow.nn.module import Module
from actorflow.process.world import get_rank, get_world_size
from actorflow.random import default_generator
from actorflow.scope import current_interpreter
from actorflow.tensor import Tensor

__all__ = ["OFRecordBatch", "write_ofrecord", "read_ofrecord", "part_file_names",
           "OFRecordReader", "OFRecordRawDecoder", "OFRecordBytesDecoder",
           "OFRecordImageDecoder", "OFRecordImageDecoderRandomCrop"]

_LEN = struct.Struct("<q")


class OFRecordBatch:
    """A batch of parsed OFRecords (OneFlow's tensor of dtype ``OFRecord``, shape ``(N,)``):
    ``batch[i]`` is record ``i``, a dict feature name -> ``Feature``."""

    __slots__ = ("records",)
    dtype = "OFRecord"

    def __init__(self, records: Sequence[dict]) -> None:
        self.records = tuple(records)

    @property
    def shape(self) -> tuple:
        return (len(self.records),)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> dict:
        return self.records[i]

    def __iter__(self):
        return iter(self.records)

    def __repr__(self) -> str:
        keys = sorted(self.records[0]) if self.records else []
        return f"OFRecordBatch(shape=({len(self)},), features={keys})"

    def feature(self, i: int, name: str, who: str) -> Feature:
        """Feature ``name`` of record ``i``; a clear error naming ``who`` when missing."""
        rec = self.records[i]
        if name not in rec:
            raise KeyError(f"{who}: record {i} has no feature {name!r} (it has "
                           f"{sorted(rec)})")
        return rec[name]


def _as_batch(x, who: str) -> OFRecordBatch:
    if isinstance(x, OFRecordBatch):
        return x
    if isinstance(x, (list, tuple)) and all(isinstance(r, dict) for r in x):
        return OFRecordBatch(x)
    raise TypeError(f"{who}: expected the OFRecordBatch an OFRecordReader returns, got "
                    f"{type(x).__name__}")


# ---- files -----------------------------------------------------------------------------------

def write_ofrecord(path: str, records: Iterable[dict]) -> int:
    """Write ``records`` (each a dict name -> ``Feature`` or a value ``Feature.of`` takes) to
    the part file ``path``; returns how many were written."""
    n = 0
    with open(path, "wb") as f:
        for rec in records:
            data = encode_record(rec)
            f.write(_LEN.pack(len(data)))
            f.write(data)
            n += 1
    return n


def read_ofrecord(path: str) -> Iterator[bytes]:
    """The serialized records of the part file ``path``, in order."""
    with open(path, "rb") as f:
        while True:
            head = f.read(8)
            if not head:
                return
            if len(head) < 8:
                raise ValueError(f"OFRecord file {path}: truncated length at the end")
            (size,) = _LEN.unpack(head)
            if size <= 0:
                raise ValueError(f"OFRecord file {path}: record length {size} at offset "
                                 f"{f.tell() - 8}")
            data = f.read(size)
            if len(data) != size:
                raise ValueError(f"OFRecord file {path}: record of {size} bytes truncated to "
                                 f"{len(data)}")
            yield data


def part_file_names(data_part_num: int, part_name_prefix: str = "part-",
                    part_name_suffix_length: int = -1) -> list:
    """The part file names of a dataset of ``data_part_num`` parts."""
    width = max(part_name_suffix_length, 0)
    return [f"{part_name_prefix}{str(i).zfill(width)}" for i in range(data_part_num)]


def _balanced_range(total: int, parts: int, i: int) -> range:
    base, rem = divmod(total, parts)
    start = i * base + min(i, rem)
    return range(start, start + base + (1 if i < rem else 0))


# ---- the reader ------------------------------------------------------------------------------

class _RecordStream:
    """Endless records of this process's part files: in order, again from the first part at
    the end (or, with ``shuffle_after_epoch``, over a new seeded permutation of all parts)."""

    def __init__(self, paths: list, rank: int, world: int, shuffle_after_epoch: bool,
                 seed: int):
        self.paths, self.rank, self.world = list(paths), rank, world
        self.shuffle_after_epoch, self.seed, self.epoch = shuffle_after_epoch, seed, 0
        self._it = self._epoch()

    def _local(self) -> list:
        return [self.paths[i] for i in _balanced_range(len(self.paths), self.world, self.rank)]

    def _epoch(self) -> Iterator[bytes]:
        for p in self._local():
            yield from read_ofrecord(p)

    def next(self) -> bytes:
        for _ in range(2):
            try:
                return next(self._it)
            except StopIteration:
                if self.shuffle_after_epoch:
                    self.epoch += 1
                    order = np.random.Generator(np.random.MT19937(self.seed + self.epoch))
                    self.paths = [self.paths[i] for i in order.permutation(len(self.paths))]
                self._it = self._epoch()
        raise RuntimeError(f"OFRecordReader: the part files {self._local()} hold no record")


class OFRecordReader(Module):
    """Reads ``batch_size`` records per call from the OFRecord dataset in ``ofrecord_dir``
    (OneFlow's ``nn.OFRecordReader``), as an ``OFRecordBatch``.

    Parts ``0 .. data_part_num - 1`` are split evenly over the processes (this one reads its
    contiguous share); records come in file order and wrap around at the end of an epoch.
    ``shuffle_after_epoch`` permutes the part order at each new epoch (seeded by the epoch);
    ``random_shuffle`` draws each record through a buffer of ``shuffle_buffer_size`` records
    (each new record takes a random slot and the one there is emitted). ``random_seed`` -1
    draws the seed from the global generator (``flow.manual_seed`` makes it reproducible).
    ``placement`` / ``sbp`` (a global batch) are not supported: records are host values."""

    def __init__(self, ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = -1,
                 random_shuffle: bool = False, shuffle_buffer_size: int = 1024,
                 shuffle_after_epoch: bool = False, random_seed: int = -1, device=None,
                 placement=None, sbp=None, name: str | None = None) -> None:
        super().__init__()
        if placement is not None or sbp is not None:
            raise NotImplementedError("OFRecordReader: placement / sbp (a global record batch) "
                                      "is not supported; records are read per process (each "
                                      "reads its share of the parts)")
        if batch_size <= 0:
            raise ValueError(f"OFRecordReader: batch_size must be positive, got {batch_size}")
        if data_part_num <= 0:
            raise ValueError(f"OFRecordReader: data_part_num must be positive, got "
                             f"{data_part_num}")
        if random_shuffle and shuffle_buffer_size <= 0:
            raise ValueError(f"OFRecordReader: shuffle_buffer_size must be positive, got "
                             f"{shuffle_buffer_size}")
        world, rank = get_world_size(), get_rank()
        if world > data_part_num:
            raise ValueError(f"OFRecordReader: {world} processes need at least as many part "
                             f"files, got data_part_num={data_part_num}")
        names = part_file_names(data_part_num, part_name_prefix, part_name_suffix_length)
        paths = [os.path.join(ofrecord_dir, n) for n in names]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"OFRecordReader: missing part files {missing[:3]}"
                                    f"{' ...' if len(missing) > 3 else ''}")
        self.ofrecord_dir, self.batch_size, self.data_part_num = ofrecord_dir, batch_size, \
            data_part_num
        self.part_name_prefix, self.part_name_suffix_length = part_name_prefix, \
            part_name_suffix_length
        self.random_shuffle, self.shuffle_buffer_size = random_shuffle, shuffle_buffer_size
        self.shuffle_after_epoch = shuffle_after_epoch
        self.seed = default_generator.next_seed() if random_seed is None or random_seed < 0 \
            else int(random_seed)
        self.device = device
        self._stream = _RecordStream(paths, rank, world, shuffle_after_epoch, self.seed)
        self._buffer: list | None = None
        self._rng = np.random.Generator(np.random.MT19937(self.seed))

    def _next(self) -> bytes:
        if not self.random_shuffle:
            return self._stream.next()
        if self._buffer is None:
            self._buffer = [self._stream.next() for _ in range(self.shuffle_buffer_size)]
        rec = self._stream.next()
        slot = int(self._rng.integers(len(self._buffer)))
        self._buffer[slot], rec = rec, self._buffer[slot]
        return rec

    def forward(self) -> OFRecordBatch:
        if current_interpreter() is not None:
            raise RuntimeError("OFRecordReader runs on the host, eagerly; it cannot be traced "
                               "into an nn.Graph: read the batch outside and pass tensors in")
        return OFRecordBatch([decode_record(self._next()) for _ in range(self.batch_size)])


# ---- decoders --------------------------------------------------------------------------------

def _raw_values(f: Feature, n: int, truncate: bool, varying: bool, who: str, i: int):
    """The first values of feature ``f`` for a sample of ``n`` elements (OneFlow's rules)."""
    if f.kind == "bytes_list":
        if len(f.value) != 1:
            raise ValueError(f"{who}: record {i}: a bytes feature must hold one value, got "
                             f"{len(f.value)}")
        return np.frombuffer(f.value[0], np.int8)[:n]
    v = f.value
    if truncate:
        return v[:n]
    if varying:
        if len(v) > n:
            raise ValueError(f"{who}: record {i} holds {len(v)} values, more than the shape's "
                             f"{n}")
        return v
    if len(v) != n:
        raise ValueError(f"{who}: record {i} holds {len(v)} values, the shape needs {n} "
                         f"(pass truncate=True to cut or zero-pad)")
    return v


class OFRecordRawDecoder(Module):
    """Feature ``blob_name`` of each record as numbers: a tensor ``(N, *shape)`` of ``dtype``
    (OneFlow's ``nn.OFRecordRawDecoder``). A numeric list must hold exactly ``prod(shape)``
    values, unless ``truncate`` (cut or zero-pad) or ``dim1_varying_length`` (fewer allowed,
    zero-padded); a bytes feature (one value) is read as int8 bytes, cut or zero-padded."""

    def __init__(self, blob_name: str, shape: Sequence[int], dtype: dt.dtype,
                 dim1_varying_length: bool = False, truncate: bool = False,
                 auto_zero_padding: bool = False, name: str | None = None) -> None:
        super().__init__()
        if not isinstance(dtype, dt.dtype) or dtype.is_complex or dtype in (dt.float16,
                                                                            dt.bfloat16):
            raise TypeError(f"OFRecordRawDecoder: dtype must be an integer, float32 or float64 "
                            f"dtype, got {dtype}")
        self.blob_name, self.shape, self.dtype = blob_name, tuple(int(s) for s in shape), dtype
        self.dim1_varying_length = dim1_varying_length
        self.truncate = truncate or auto_zero_padding

    def forward(self, input) -> Tensor:
        who = f"OFRecordRawDecoder({self.blob_name!r})"
        batch = _as_batch(input, who)
        n = int(np.prod(self.shape))
        out = np.zeros((len(batch), n), self.dtype.np)
        for i in range(len(batch)):
            v = _raw_values(batch.feature(i, self.blob_name, who), n, self.truncate,
                            self.dim1_varying_length, who, i)
            out[i, :len(v)] = v
        return _tensor(out.reshape((len(batch),) + self.shape), dtype=self.dtype)


def _one_bytes(batch: OFRecordBatch, i: int, name: str, who: str) -> bytes:
    f = batch.feature(i, name, who)
    if f.kind != "bytes_list" or len(f.value) != 1:
        raise ValueError(f"{who}: record {i}: feature {name!r} must be a bytes_list of one "
                         f"value, got {f.kind} of {len(f.value)}")
    return f.value[0]


class OFRecordBytesDecoder(Module):
    """Feature ``blob_name`` (a bytes_list of one value) of each record as a ``TensorBuffer``
    of uint8 arrays (OneFlow's ``nn.OFRecordBytesDecoder``)."""

    def __init__(self, blob_name: str, name: str | None = None) -> None:
        super().__init__()
        self.blob_name = blob_name

    def forward(self, input) -> TensorBuffer:
        who = f"OFRecordBytesDecoder({self.blob_name!r})"
        batch = _as_batch(input, who)
        return TensorBuffer([np.frombuffer(_one_bytes(batch, i, self.blob_name, who),
                                           np.uint8).copy() for i in range(len(batch))])


class OFRecordImageDecoder(Module):
    """Feature ``blob_name`` (an encoded image) of each record decoded into a ``TensorBuffer``
    of (H, W, C) uint8 images in ``color_space`` (OneFlow's ``nn.OFRecordImageDecoder``;
    ``image_codec.py`` says which formats need Pillow)."""

    def __init__(self, blob_name: str, color_space: str = "BGR") -> None:
        super().__init__()
        self.blob_name, self.color_space = blob_name, check_color_space(color_space)

    def forward(self, input) -> TensorBuffer:
        who = f"OFRecordImageDecoder({self.blob_name!r})"
        batch = _as_batch(input, who)
        return TensorBuffer([decode_image(_one_bytes(batch, i, self.blob_name, who),
                                          self.color_space) for i in range(len(batch))])


class OFRecordImageDecoderRandomCrop(Module):
    """``OFRecordImageDecoder`` followed by a random crop per image (OneFlow's
    ``nn.OFRecordImageDecoderRandomCrop``): a window whose area is a fraction in
    ``random_area`` of the image's and whose width/height ratio is in
    ``random_aspect_ratio`` (log-uniform), ``num_attempts`` tries, then a centred fallback;
    its corner is uniform over the image. Sample ``i`` of the batch has its own generator,
    seeded from ``random_seed`` (from the global generator when None)."""

    def __init__(self, blob_name: str, color_space: str = "BGR", num_attempts: int = 10,
                 random_seed: int | None = None, random_area: Sequence[float] = (0.08, 1.0),
                 random_aspect_ratio: Sequence[float] = (0.75, 1.333333)) -> None:
        super().__init__()
        self.blob_name, self.color_space = blob_name, check_color_space(color_space)
        self.seed = default_generator.next_seed() if random_seed is None else int(random_seed)
        self.num_attempts, self.random_area = num_attempts, tuple(random_area)
        self.random_aspect_ratio = tuple(random_aspect_ratio)
        RandomCropGenerator(self.random_aspect_ratio, self.random_area, 0, num_attempts)  # checks
        self._gens: list = []

    def _gen(self, i: int) -> RandomCropGenerator:
        while len(self._gens) <= i:
            self._gens.append(RandomCropGenerator(self.random_aspect_ratio, self.random_area,
                                                  crop_seed(self.seed, len(self._gens)),
                                                  self.num_attempts))
        return self._gens[i]

    def forward(self, input) -> TensorBuffer:
        who = f"OFRecordImageDecoderRandomCrop({self.blob_name!r})"
        batch = _as_batch(input, who)
        out = []
        for i in range(len(batch)):
            img = decode_image(_one_bytes(batch, i, self.blob_name, who), self.color_space)
            y, x, h, w = self._gen(i).window(img.shape[0], img.shape[1])
            out.append(np.ascontiguousarray(img[y:y + h, x:x + w]))
        return TensorBuffer(out)

