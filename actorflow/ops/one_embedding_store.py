"""The key-value stores behind ``flow.one_embedding``: one per embedding name, on this process.

A store maps a key (a feature id) to a *line* of ``storage_dim`` values: the embedding
(``embedding_dim`` values, the columns side by side) followed by the optimizer's state slots
(momentum, Adam's two moments, ...: ``embedding_dim`` values each). A line is created the first
time its key is looked up: its columns drawn with the initializer of the key's table and column
(counter-based: each value is a hash of the embedding's seed, the table, the key and the
value's position, so a row's initial values depend neither on the order of lookups nor on the
batch it came in, and new rows are drawn as whole arrays); its state slots are
set the first time the row is updated, to the optimizer's initial state values.

Lines live in host memory (a growing array), or, for a store made with
``make_cached_ssd_store_options``, in a file under the persistent path mapped into memory (the
operating system's page cache is its cache), so a table may outgrow the memory. The key index
is a dictionary in memory. Snapshots are files: see ``one_embedding_files``.

The ops of ``ops/one_embedding.py`` find a store by name (``get``); their kernels are the only
code that reads or writes lines while training, ordered by the ops' data dependencies.
"""
from __future__ import annotations

import os
import threading

import numpy as np

INITIALIZER_TYPES = ("uniform", "normal", "constant", "trunc_normal")

_STORES: dict = {}
_LOCK = threading.Lock()


def check_initializer(init) -> dict:
    """``init`` if it is a valid initializer dict (``make_uniform_initializer`` ...), else a
    ValueError naming what is wrong."""
    if not isinstance(init, dict) or init.get("type") not in INITIALIZER_TYPES:
        raise ValueError(f"one_embedding: an initializer is a dict with 'type' one of "
                         f"{INITIALIZER_TYPES}, got {init!r}")
    kind = init["type"]
    if kind == "uniform":
        need = ("low", "high")
    elif kind == "constant":
        need = ("value",)
    else:
        need = ("mean std a b" if kind == "trunc_normal" else "mean std").split()
    missing = [k for k in need if k not in init]
    if missing:
        raise ValueError(f"one_embedding: a {init['type']} initializer needs {missing}: {init!r}")
    if "std" in need and float(init["std"]) < 0:
        raise ValueError(f"one_embedding: std must be >= 0, got {init['std']}")
    if init["type"] == "uniform" and float(init["low"]) > float(init["high"]):
        raise ValueError(f"one_embedding: uniform needs low <= high: {init!r}")
    if init["type"] == "trunc_normal" and not float(init["a"]) < float(init["b"]):
        raise ValueError(f"one_embedding: trunc_normal needs a < b: {init!r}")
    return init


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniform(base: np.ndarray, first: int, width: int, draw: int) -> np.ndarray:
    """(len(base), width) uniforms in [0, 1): element ``first + j`` of draw ``draw`` of each
    row, a hash of the row's ``base`` and those two numbers (counter-based: no state)."""
    j = np.arange(first, first + width, dtype=np.uint64) + np.uint64(1)
    x = _mix(base[:, None] + (j + np.uint64(draw) * np.uint64(1 << 32)) * _GOLDEN)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _normal(base, first, width, draw) -> np.ndarray:
    """Standard normals (Box-Muller over draws 2 * draw and 2 * draw + 1)."""
    u1 = _uniform(base, first, width, 2 * draw)
    u2 = _uniform(base, first, width, 2 * draw + 1)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


def _draw(base: np.ndarray, init: dict, first: int, width: int) -> np.ndarray:
    """Column values (len(base) x width) drawn with initializer ``init``."""
    kind, n = init["type"], len(base)
    if kind == "uniform":
        lo, hi = float(init["low"]), float(init["high"])
        return lo + (hi - lo) * _uniform(base, first, width, 0)
    if kind == "constant":
        return np.full((n, width), float(init["value"]))
    mean, std = float(init["mean"]), float(init["std"])
    out = mean + std * _normal(base, first, width, 0)
    if kind == "normal":
        return out
    a, b = float(init["a"]), float(init["b"])
    for draw in range(1, 1000):  # redraw the values outside [a, b]
        bad = (out < a) | (out > b)
        if not bad.any():
            return out
        out = np.where(bad, mean + std * _normal(base, first, width, draw), out)
    return np.clip(out, a, b)  # [a, b] far in a tail: what is left sits on the bounds


class EmbeddingStore:
    """The lines of one embedding (see the module docstring).

    ``tables[t]`` is the list of column initializers of table ``t``; ``column_dims`` the
    widths of the columns; ``path`` this process's directory under the persistent path
    (snapshots go to ``path/snapshots``); ``on_file``: keep the lines in ``path/lines.bin``.
    """

    def __init__(self, name: str, column_dims: list, storage_dim: int, dtype, key_dtype,
                 tables: list, seed: int, path: str, on_file: bool = False,
                 capacity_hint: int = 0):
        self.name = name
        self.column_dims = [int(d) for d in column_dims]
        self.embedding_dim = sum(self.column_dims)
        self.storage_dim = int(storage_dim)
        if self.storage_dim < self.embedding_dim:
            raise ValueError(f"one_embedding {name!r}: storage_dim {storage_dim} is smaller than "
                             f"embedding_dim {self.embedding_dim}")
        self.dtype = np.dtype(dtype)
        self.key_dtype = np.dtype(key_dtype)
        self.tables = [[check_initializer(i) for i in cols] for cols in tables]
        self.seed = int(seed)
        self.path = path
        self.on_file = bool(on_file)
        self.index: dict = {}
        self.size = 0
        self.pending: list = []  # (keys, gradient rows) pushed since the last update
        cap = max(16, min(int(capacity_hint or 0), 1 << 16))
        self.keys = np.empty(cap, self.key_dtype)
        self.ready = np.zeros(cap, bool)  # state slots set
        self.lines = self._new_lines(cap)

    # -- storage of the lines --------------------------------------------------------------------
    def _new_lines(self, cap: int) -> np.ndarray:
        if not self.on_file:
            return np.zeros((cap, self.storage_dim), self.dtype)
        os.makedirs(self.path, exist_ok=True)
        file = os.path.join(self.path, "lines.bin")
        with open(file, "ab" if getattr(self, "lines", None) is not None else "wb") as f:
            f.truncate(cap * self.storage_dim * self.dtype.itemsize)
        return np.memmap(file, self.dtype, "r+", shape=(cap, self.storage_dim))

    def _grow(self, need: int) -> None:
        cap = len(self.keys)
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        self.keys = np.concatenate([self.keys, np.empty(cap - len(self.keys), self.key_dtype)])
        self.ready = np.concatenate([self.ready, np.zeros(cap - len(self.ready), bool)])
        if self.on_file:
            self.lines.flush()
            self.lines = self._new_lines(cap)  # the file grows, its lines stay
        else:
            grown = np.zeros((cap, self.storage_dim), self.dtype)
            grown[:self.size] = self.lines[:self.size]
            self.lines = grown

    # -- lookups ---------------------------------------------------------------------------------
    def rows(self, keys: np.ndarray, table_ids: np.ndarray, skip=None) -> np.ndarray:
        """The row of each key (1-D), creating the missing ones with their table's
        initializers (table ``table_ids[i]`` for ``keys[i]``, the first occurrence's for a
        repeated key); -1 where ``keys == skip`` (padding, never created)."""
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        rows = np.empty(len(uniq), np.int64)
        new = []
        index = self.index
        for i, k in enumerate(uniq.tolist()):
            r = index.get(k)
            if r is None:
                if skip is not None and k == skip:
                    r = -1
                else:
                    new.append(i)
                    r = -2
            rows[i] = r
        if new:
            tids = table_ids[first[new]]
            bad = (tids < 0) | (tids >= len(self.tables))
            if bad.any():
                raise ValueError(f"one_embedding {self.name!r}: table id {int(tids[bad][0])} "
                                 f"out of range [0, {len(self.tables)})")
            self._grow(self.size + len(new))
            new_rows = np.arange(self.size, self.size + len(new))
            new_keys = uniq[new]
            self.keys[new_rows] = new_keys
            self.ready[new_rows] = False
            self.lines[new_rows, self.embedding_dim:] = 0
            for t in np.unique(tids).tolist():
                pick = tids == t
                self.lines[new_rows[pick], :self.embedding_dim] = self._initial(new_keys[pick], t)
            index.update(zip(new_keys.tolist(), new_rows.tolist()))
            rows[new] = new_rows
            self.size += len(new)
        return rows[inv.reshape(-1)]

    def _initial(self, keys: np.ndarray, table: int) -> np.ndarray:
        """The initial embeddings of new ``keys`` of ``table``: each value a function of the
        seed, the table, the key and its position only."""
        salt = _mix(np.array([self.seed % (1 << 64)], np.uint64) * _GOLDEN
                    + np.uint64(table + 1))
        base = _mix(keys.astype(np.int64).view(np.uint64) ^ salt)
        cols, first = [], 0
        for init, d in zip(self.tables[table], self.column_dims):
            cols.append(_draw(base, init, first, d))
            first += d
        return np.concatenate(cols, axis=1)

    # -- gradients -------------------------------------------------------------------------------
    def push(self, keys: np.ndarray, grads: np.ndarray) -> None:
        """Keep the gradient rows of a lookup for the next update (copies of both)."""
        self.pending.append((np.array(keys, copy=True), np.array(grads, copy=True)))

    def pop_pending(self) -> tuple:
        """The unique keys pushed since the last update, their summed gradient rows (in the
        store's dtype), and their rows; the pending list is emptied."""
        pend, self.pending = self.pending, []
        d = self.embedding_dim
        if not pend:
            return np.empty(0, self.key_dtype), np.zeros((0, d), self.dtype), \
                np.empty(0, np.int64)
        keys = np.concatenate([k for k, _ in pend])
        grads = np.concatenate([g.reshape(-1, d) for _, g in pend])
        uniq, inv = np.unique(keys, return_inverse=True)
        summed = np.zeros((len(uniq), d), np.float64 if self.dtype.itemsize < 4 else self.dtype)
        np.add.at(summed, inv.reshape(-1), grads)
        rows = np.fromiter((self.index[k] for k in uniq.tolist()), np.int64, len(uniq))
        return uniq, summed.astype(self.dtype, copy=False), rows

    def clear_pending(self) -> None:
        """Drop the gradient rows pushed since the last update."""
        self.pending = []

    # -- whole-table access (snapshots, persistent tables) ---------------------------------------
    def contents(self) -> tuple:
        """Copies of ``(keys, lines, ready)`` of every row, in creation order."""
        n = self.size
        return (self.keys[:n].copy(), np.array(self.lines[:n], copy=True),
                self.ready[:n].copy())

    def replace(self, keys: np.ndarray, lines: np.ndarray, ready: np.ndarray) -> None:
        """Make the store hold exactly these rows (a loaded snapshot)."""
        if lines.ndim != 2 or lines.shape[1] != self.storage_dim or len(keys) != len(lines):
            raise ValueError(f"one_embedding {self.name!r}: a snapshot of {lines.shape} lines "
                             f"for {len(keys)} keys does not fit storage_dim "
                             f"{self.storage_dim}")
        self.index = {}
        self.size = 0
        self.pending = []
        self._grow(max(len(keys), 1))
        n = len(keys)
        self.keys[:n] = keys
        self.lines[:n] = lines
        self.ready[:n] = ready
        self.index = {k: i for i, k in enumerate(self.keys[:n].tolist())}
        if len(self.index) != n:
            raise ValueError(f"one_embedding {self.name!r}: the snapshot repeats a key")
        self.size = n


def create(store: EmbeddingStore) -> EmbeddingStore:
    """Register ``store`` under its name (a new embedding of an existing name replaces the
    old one, as a re-created OneFlow embedding takes over its name)."""
    with _LOCK:
        _STORES[store.name] = store
    return store


def get(name: str) -> EmbeddingStore:
    """The store of embedding ``name``; a KeyError naming it if there is none."""
    try:
        return _STORES[name]
    except KeyError:
        raise KeyError(f"one_embedding: no embedding named {name!r} on this process") from None


__all__ = ["EmbeddingStore", "check_initializer", "create", "get", "INITIALIZER_TYPES"]
