"""The key-value stores behind ``flow.one_embedding``: one per embedding name, on this process.

A store maps a key (a feature id) to a *line* of ``storage_dim`` values: the embedding
(``embedding_dim`` values, the columns side by side) followed by the optimizer's state slots
(momentum, Adam's two moments, ...: ``embedding_dim`` values each). A line is created the first
time its key is looked up: its columns drawn with the initializer of the key's table and column
(from a generator seeded with the embedding's seed, the table and the key, so a row's initial
values depend neither on the order of lookups nor on the batch it came in); its state slots are
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


def _draw(rng: np.random.Generator, init: dict, n: int) -> np.ndarray:
    kind = init["type"]
    if kind == "uniform":
        return rng.uniform(float(init["low"]), float(init["high"]), n)
    if kind == "normal":
        return rng.normal(float(init["mean"]), float(init["std"]), n)
    if kind == "constant":
        return np.full(n, float(init["value"]))
    mean, std, a, b = (float(init[k]) for k in ("mean", "std", "a", "b"))
    out = rng.normal(mean, std, n)
    bad = (out < a) | (out > b)
    for _ in range(1000):  # redraw the values outside [a, b]
        if not bad.any():
            return out
        out[bad] = rng.normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
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
            for j, (i, t) in enumerate(zip(new, tids.tolist())):
                k = int(uniq[i])
                r = self.size + j
                self.keys[r] = k
                self.lines[r, :self.embedding_dim] = self._initial(k, t)
                self.lines[r, self.embedding_dim:] = 0
                self.ready[r] = False
                index[k] = r
                rows[i] = r
            self.size += len(new)
        return rows[inv.reshape(-1)]

    def _initial(self, key: int, table: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, table, key % (1 << 64)])
        return np.concatenate([_draw(rng, init, d)
                               for init, d in zip(self.tables[table], self.column_dims)])

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
