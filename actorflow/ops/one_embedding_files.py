"""The files of a one_embedding persistent table's snapshot (actorflow's own format).

A table is a directory (an embedding with persistent path ``P`` keeps this process's table in
``P/<rank>-<world size>``); snapshot ``NAME`` of it is the directory ``snapshots/NAME`` inside,
holding:

* ``meta.json``: ``{"format": "actorflow.one_embedding.table", "version": 1,
  "key_type": "int64", "value_type": "float32", "storage_dim": D, "num_keys": N}``
  (NumPy dtype names);
* ``keys.bin``: the N keys, raw little-endian values of ``key_type``;
* ``values.bin``: the N lines of D values each (row-major), raw little-endian ``value_type``;
  a line is the embedding followed by the optimizer's state slots;
* ``ready.bin``: N bytes, 1 where the line's state slots hold optimizer state, 0 where they
  are still to be initialised by the first update (absent: every line is ready).

A snapshot is written into a temporary directory beside its target and renamed into place, so a
reader sees a whole snapshot or none; writing a name again replaces it.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid

import numpy as np

FORMAT = "actorflow.one_embedding.table"


def table_dir(persistent_path: str, rank: int, world: int) -> str:
    """The directory of this process's table under an embedding's persistent path."""
    return os.path.join(persistent_path, f"{rank}-{world}")


def snapshot_dir(table: str, name: str) -> str:
    """The directory of snapshot ``name`` of the table in directory ``table``."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ValueError(f"one_embedding: a snapshot name is a non-empty file name, got {name!r}")
    return os.path.join(table, "snapshots", name)


def write_snapshot(target: str, keys: np.ndarray, values: np.ndarray,
                   ready: np.ndarray | None = None) -> None:
    """Write ``keys`` (1-D) and ``values`` (``len(keys)`` x D) as the snapshot directory
    ``target``."""
    keys, values = np.asarray(keys), np.asarray(values)
    if keys.ndim != 1 or values.ndim != 2 or len(keys) != len(values):
        raise ValueError(f"one_embedding: a table needs 1-D keys and one line of values per key, "
                         f"got keys {keys.shape} and values {values.shape}")
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    os.makedirs(tmp)
    try:
        meta = {"format": FORMAT, "version": 1, "key_type": keys.dtype.name,
                "value_type": values.dtype.name, "storage_dim": int(values.shape[1]),
                "num_keys": int(len(keys))}
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f)
        keys.astype(keys.dtype.newbyteorder("<"), copy=False).tofile(os.path.join(tmp, "keys.bin"))
        values.astype(values.dtype.newbyteorder("<"), copy=False).tofile(
            os.path.join(tmp, "values.bin"))
        if ready is not None:
            np.asarray(ready, np.uint8).tofile(os.path.join(tmp, "ready.bin"))
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_snapshot(source: str, key_dtype=None, value_dtype=None,
                  storage_dim: int | None = None) -> tuple:
    """``(keys, values, ready)`` of the snapshot directory ``source``, checked against the
    expected key dtype, value dtype and storage_dim when given; a ValueError naming the
    directory when it is missing or malformed."""
    try:
        with open(os.path.join(source, "meta.json")) as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"one_embedding: no snapshot at {source}") from None
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"one_embedding: unreadable snapshot meta.json in {source}: {e}") from None
    try:
        if meta.get("format") != FORMAT:
            raise ValueError("not an actorflow one_embedding table")
        kd, vd = np.dtype(meta["key_type"]), np.dtype(meta["value_type"])
        dim, n = int(meta["storage_dim"]), int(meta["num_keys"])
        if dim < 1 or n < 0:
            raise ValueError(f"storage_dim {dim}, num_keys {n}")
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"one_embedding: malformed snapshot {source}: {e}") from None
    for what, want, got in (("key type", key_dtype, kd), ("value type", value_dtype, vd),
                            ("storage_dim", storage_dim, dim)):
        if want is not None and (np.dtype(want) if what != "storage_dim" else int(want)) != got:
            raise ValueError(f"one_embedding: snapshot {source} has {what} {got}, expected {want}")
    keys = np.fromfile(os.path.join(source, "keys.bin"), kd.newbyteorder("<"))
    values = np.fromfile(os.path.join(source, "values.bin"), vd.newbyteorder("<"))
    if len(keys) != n or values.size != n * dim:
        raise ValueError(f"one_embedding: snapshot {source} is truncated ({len(keys)} keys, "
                         f"{values.size} values for {n} x {dim})")
    ready_file = os.path.join(source, "ready.bin")
    ready = np.ones(n, bool)
    if os.path.exists(ready_file):
        ready = np.fromfile(ready_file, np.uint8).astype(bool)
        if len(ready) != n:
            raise ValueError(f"one_embedding: snapshot {source} has {len(ready)} ready flags for "
                             f"{n} keys")
    return keys.astype(kd), values.astype(vd).reshape(n, dim), ready


__all__ = ["FORMAT", "table_dir", "snapshot_dir", "write_snapshot", "read_snapshot"]
