"""Readers and writers of one_embedding persistent tables' snapshots (OneFlow's
``make_persistent_table_reader`` / ``make_persistent_table_writer``); the file format is
actorflow's own, described in ``actorflow/ops/one_embedding_files.py``.

``paths`` name table directories (an embedding with persistent path ``P`` keeps this process's
table in ``P/<rank>-<world>``, ``P/0-1`` on one process). A writer spreads the keys it is
given among its tables by ``key mod len(paths)`` (as unsigned 64-bit) and writes each table's
snapshot when closed; a reader yields ``(keys, values)`` NumPy chunks of every table in turn.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops import one_embedding_files as files

_CHUNK = 4096  # rows per chunk a reader yields


def _paths(paths) -> list:
    if isinstance(paths, str):
        return [paths]
    paths = list(paths)
    if not paths or not all(isinstance(p, str) for p in paths):
        raise ValueError(f"one_embedding: paths must be a non-empty list of str, got {paths!r}")
    return paths


def _types(key_type, value_type, storage_dim) -> tuple:
    kd, vd = dt.as_dtype(key_type), dt.as_dtype(value_type)
    if kd._category != 1 or not vd.is_floating_point:
        raise TypeError(f"one_embedding: key_type must be an integer dtype and value_type a "
                        f"floating one, got {key_type} and {value_type}")
    if int(storage_dim) <= 0:
        raise ValueError(f"one_embedding: storage_dim must be > 0, got {storage_dim}")
    return np.dtype(kd.np), np.dtype(vd.np), int(storage_dim)


class PersistentTableWriter:
    """Writes snapshot ``snapshot_name`` of the tables in ``paths``: ``write(keys, values)``
    any number of times (a later value of a key replaces an earlier one), then ``close()``
    (or leave the ``with`` block). Each table's snapshot holds exactly the keys written to
    it."""

    def __init__(self, paths, snapshot_name: str, key_type, value_type, storage_dim: int):
        self.paths = _paths(paths)
        self.targets = [files.snapshot_dir(p, snapshot_name) for p in self.paths]
        self.key_dtype, self.value_dtype, self.storage_dim = _types(key_type, value_type,
                                                                    storage_dim)
        self._rows: list = [dict() for _ in self.paths]
        self.closed = False

    def write(self, keys, values) -> None:
        """Add ``keys`` (1-D, of the key type) with ``values`` (``len(keys)`` x storage_dim, of
        the value type)."""
        if self.closed:
            raise ValueError("PersistentTableWriter.write: the writer is closed")
        keys, values = np.asarray(keys), np.asarray(values)
        if keys.ndim != 1 or values.ndim != 2 or len(keys) != len(values) \
                or values.shape[1] != self.storage_dim:
            raise ValueError(f"PersistentTableWriter.write: need 1-D keys and "
                             f"(len(keys), {self.storage_dim}) values, got {keys.shape} and "
                             f"{values.shape}")
        if keys.dtype != self.key_dtype or values.dtype != self.value_dtype:
            raise TypeError(f"PersistentTableWriter.write: keys must be {self.key_dtype} and "
                            f"values {self.value_dtype}, got {keys.dtype} and {values.dtype}")
        shard = keys.astype(np.uint64) % np.uint64(len(self.paths))
        for k, s, v in zip(keys.tolist(), shard.tolist(), values):
            self._rows[s][k] = np.array(v, copy=True)

    def close(self) -> None:
        """Write the snapshots (once; later calls do nothing)."""
        if self.closed:
            return
        self.closed = True
        for target, rows in zip(self.targets, self._rows):
            keys = np.fromiter(rows.keys(), self.key_dtype, len(rows))
            values = np.stack(list(rows.values())) if rows else \
                np.zeros((0, self.storage_dim), self.value_dtype)
            files.write_snapshot(target, keys, values.astype(self.value_dtype, copy=False))
        self._rows = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class PersistentTableReader:
    """Reads snapshot ``snapshot_name`` of the tables in ``paths``: iterating yields
    ``(keys, values)`` chunks (at most 4096 rows each) of one table after the other."""

    def __init__(self, paths, snapshot_name: str, key_type, value_type, storage_dim: int):
        self.paths = _paths(paths)
        self.sources = [files.snapshot_dir(p, snapshot_name) for p in self.paths]
        self.key_dtype, self.value_dtype, self.storage_dim = _types(key_type, value_type,
                                                                    storage_dim)
        for s in self.sources:  # fail at construction on a missing or mismatched table
            files.read_snapshot(s, self.key_dtype, self.value_dtype, self.storage_dim)
        self._chunks = self._generate()
        self.closed = False

    def _generate(self):
        for s in self.sources:
            keys, values, _ = files.read_snapshot(s, self.key_dtype, self.value_dtype,
                                                  self.storage_dim)
            for i in range(0, len(keys), _CHUNK):
                yield keys[i:i + _CHUNK], values[i:i + _CHUNK]

    def __iter__(self):
        return self

    def __next__(self) -> tuple:
        if self.closed:
            raise StopIteration
        return next(self._chunks)

    def close(self) -> None:
        """Stop reading (later iteration yields nothing)."""
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def make_persistent_table_reader(paths, snapshot_name: str, key_type, value_type,
                                 storage_dim: int, physical_block_size: int = 4096
                                 ) -> PersistentTableReader:
    """A reader of snapshot ``snapshot_name`` of the tables in ``paths`` (see the module
    docstring); ``physical_block_size`` (512 or 4096) is accepted for OneFlow's signature."""
    _block(physical_block_size)
    return PersistentTableReader(paths, snapshot_name, key_type, value_type, storage_dim)


def make_persistent_table_writer(paths, snapshot_name: str, key_type, value_type,
                                 storage_dim: int, physical_block_size: int = 4096
                                 ) -> PersistentTableWriter:
    """A writer of snapshot ``snapshot_name`` of the tables in ``paths`` (see the module
    docstring); ``physical_block_size`` (512 or 4096) is accepted for OneFlow's signature."""
    _block(physical_block_size)
    return PersistentTableWriter(paths, snapshot_name, key_type, value_type, storage_dim)


def _block(size: int) -> None:
    if size not in (512, 4096):
        raise ValueError(f"one_embedding: physical_block_size must be 512 or 4096, got {size}")
