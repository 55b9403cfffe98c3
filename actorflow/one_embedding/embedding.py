"""``MultiTableEmbedding`` and ``MultiTableMultiColumnEmbedding``: embeddings whose rows live
in a key-value store (``actorflow/ops/one_embedding_store.py``) instead of a dense parameter.

A row is created the first time its id is looked up, drawn with its table's initializer; only
the rows a batch looks up get gradients, and the optimizer updates only those (SGD with or
without momentum, Adam/AdamW, Adagrad, ``one_embedding.Ftrl`` as in OneFlow; also RMSprop and
Adadelta: any elementwise update; not LAMB), eagerly (``optimizer.step()``,
directly or through ``one_embedding.Optimizer``) and in ``nn.Graph`` (``add_optimizer`` of the
optimizer over the module's parameters). How it works: the module's one parameter, the
*shadow* (one element), is an input of the lookup op; its gradient rule keeps the rows'
gradients in the store, and the optimizer's update of the shadow becomes the
``one_embedding_update`` op (``_Shadow._own_update``), which runs the optimizer's own update
kernel on the rows and their state slots.

Gradients pushed by ``backward()`` (several backward calls add up) are applied by the next
update of the shadow; ``zero_grad`` (of any optimizer holding the shadow) drops those not yet
applied.

On one process only: an embedding shared by several processes (ids exchanged among the
ranks) is not implemented and raises at construction.
"""
from __future__ import annotations

import datetime
import json

import numpy as np

from actorflow import env
from actorflow.framework import dtype as dt
from actorflow.functional.one_embedding_ops import one_embedding_lookup
from actorflow.nn.module import Module
from actorflow.nn.parameter import Parameter
from actorflow.one_embedding.options import read_store_options, table_initializers
from actorflow.ops import one_embedding_files as files
from actorflow.ops import one_embedding_store as stores
from actorflow.ops import registry
from actorflow.ops.one_embedding import row_update_ok
from actorflow.tensor import Tensor
from actorflow.vm import scheduler

_UPDATE = registry.get("one_embedding_update")


class _Shadow(Parameter):
    """The one-element parameter standing for an embedding's rows in the optimizer."""

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        """Assigning the shadow's gradient (what ``zero_grad`` does, with ``set_to_none``
        either way) also drops the rows' gradients no update has applied yet; backward
        accumulates into it without this setter."""
        scheduler.synchronize()  # (pending pushes are kernels: let them land first)
        stores.get(self.__dict__["embedding_name"]).clear_pending()
        Parameter.grad.fset(self, value)

    def _own_update(self, op, inputs: list, attrs: dict) -> tuple:
        """The optimizer's update call of this parameter as ``one_embedding_update``."""
        name = self.__dict__["embedding_name"]
        if not row_update_ok(op):
            raise ValueError(f"one_embedding {name!r}: rows are updated by an elementwise "
                             f"optimizer (SGD, Adam, Adagrad, RMSprop, Adadelta, Ftrl); this "
                             f"optimizer's update is {op.name}")
        if attrs.get("skip_if"):
            raise ValueError(f"one_embedding {name!r}: skipped (GradScaler) updates are not "
                             f"supported")
        # a step counter, when the op takes one, is the integer input after lr
        has_step = len(inputs) > 3 and inputs[3].dtype._category == 1
        return _UPDATE, inputs, {"embedding_name": name, "update": op.name,
                                 "update_attrs": dict(attrs), "has_step": has_step}


class Embedding(Module):
    """The common part of the two embedding classes (OneFlow's ``one_embedding.Embedding``).
    Its state dict holds, besides the shadow, the name of a snapshot it saves
    (``OneEmbeddingSnapshot``) and the store's options; loading it loads that snapshot."""

    _state_dict_extra_keys = ("OneEmbeddingSnapshot", "OneEmbeddingKeyValueOptions")

    def __init__(self, name: str, embedding_dim, dtype, key_type, tables, store_options: dict,
                 default_initializer: dict | None = None, padding_idx: int | None = None,
                 seed: int = 0):
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"one_embedding: name must be a non-empty str, got {name!r}")
        world, rank = env.get_world_size(), env.get_rank()
        if world > 1:
            raise NotImplementedError(
                f"one_embedding {name!r}: an embedding shared by {world} processes (ids "
                f"exchanged among the ranks) is not implemented; actorflow's one_embedding runs "
                f"in one process")
        column_dims = list(embedding_dim) if isinstance(embedding_dim, (list, tuple)) \
            else [embedding_dim]
        if not column_dims or any(not isinstance(d, int) or d <= 0 for d in column_dims):
            raise ValueError(f"one_embedding {name!r}: embedding_dim must be a positive int or a "
                             f"list of them, got {embedding_dim!r}")
        self.dtype = dt.as_dtype(dtype)
        self.key_type = dt.as_dtype(key_type)
        if not self.dtype.is_floating_point:
            raise TypeError(f"one_embedding {name!r}: dtype must be floating point, got {dtype}")
        if self.key_type._category != 1:
            raise TypeError(f"one_embedding {name!r}: key_type must be an integer dtype, got "
                            f"{key_type}")
        self.embedding_dim = sum(column_dims)
        inits = table_initializers(tables, column_dims, default_initializer)
        opts = read_store_options(store_options, self.embedding_dim)
        path = opts["path"]
        if isinstance(path, (list, tuple)):
            if len(path) != world:
                raise ValueError(f"one_embedding {name!r}: {len(path)} persistent paths for "
                                 f"{world} process(es)")
            self.table_path = str(path[rank])
        else:
            self.table_path = files.table_dir(path, rank, world)
        self.storage_dim = opts["storage_dim"]
        self.embedding_name = name
        self.num_tables = len(inits)
        self.padding_idx = None if padding_idx is None else int(padding_idx)
        self.seed = int(seed)
        self.key_value_store_options = json.dumps(
            {"name": name, "storage_dim": self.storage_dim, "kv_store": store_options["kv_store"],
             "key_type": str(self.key_type), "value_type": str(self.dtype)}, default=str)
        self.store = stores.create(stores.EmbeddingStore(
            name, column_dims, self.storage_dim, self.dtype.np, self.key_type.np, inits,
            self.seed, self.table_path, opts["on_file"], opts["capacity_hint"]))
        shadow = _Shadow(Tensor._wrap(np.zeros(1, self.dtype.np), self.dtype))
        shadow.__dict__["embedding_name"] = name
        self.shadow = shadow

    def forward(self, ids: Tensor, table_ids: Tensor | None = None) -> Tensor:
        """The embeddings of ``ids`` (shape ``ids.shape + (embedding_dim,)``). ``table_ids``
        (the shape of ``ids``) names each id's table; it may be left out with one table, or
        when ``ids`` has shape ``(batch, num_tables)`` and column j's ids belong to table j."""
        if ids.dtype is not self.key_type:
            raise TypeError(f"one_embedding {self.embedding_name!r}: ids must have the key_type "
                            f"{self.key_type}, got {ids.dtype}")
        return one_embedding_lookup(self.shadow, ids, table_ids, self.embedding_name,
                                    self.embedding_dim, self.num_tables, self.dtype,
                                    self.padding_idx)

    # -- snapshots -------------------------------------------------------------------------------
    def save_snapshot(self, snapshot_name: str) -> None:
        """Write every row (the embedding and its optimizer state) as snapshot
        ``snapshot_name`` under the persistent path (``<table>/snapshots/<name>``; format in
        ``actorflow/ops/one_embedding_files.py``), after the ops issued so far ran."""
        target = files.snapshot_dir(self.table_path, snapshot_name)
        scheduler.synchronize()
        keys, lines, ready = self.store.contents()
        files.write_snapshot(target, keys, lines, ready)

    def load_snapshot(self, snapshot_name: str) -> None:
        """Make the store hold exactly the rows of snapshot ``snapshot_name`` (a ValueError
        if it is missing or does not fit: key type, value type, storage_dim)."""
        source = files.snapshot_dir(self.table_path, snapshot_name)
        scheduler.synchronize()
        keys, lines, ready = files.read_snapshot(source, self.key_type.np, self.dtype.np,
                                                 self.storage_dim)
        self.store.replace(keys, lines, ready)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        name = datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S-%f")
        self.save_snapshot(name)
        destination[prefix + "OneEmbeddingSnapshot"] = name
        destination[prefix + "OneEmbeddingKeyValueOptions"] = self.key_value_store_options

    def _load_from_state_dict(self, state_dict: dict, prefix: str, missing_keys: list,
                              error_msgs: list) -> None:
        super()._load_from_state_dict(state_dict, prefix, missing_keys, error_msgs)
        key = prefix + "OneEmbeddingSnapshot"
        if key in state_dict:
            try:
                self.load_snapshot(state_dict[key])
            except ValueError as e:
                error_msgs.append(f'While loading the one_embedding snapshot named '
                                  f'"{state_dict[key]}": {e}')

    def extra_repr(self) -> str:
        return (f"name={self.embedding_name!r}, embedding_dim={self.embedding_dim}, "
                f"num_tables={self.num_tables}, storage_dim={self.storage_dim}")


class MultiTableEmbedding(Embedding):
    """Several embedding tables of one ``embedding_dim``, dtype and key type in one store
    (OneFlow's): ``tables`` a list of ``make_table_options(...)`` (each table's initializer),
    ``store_options`` from a ``make_*_store_options`` function, ``default_initializer`` for
    ``tables=None`` (one table; normal(0, 0.05) by default), ``padding_idx`` an id whose
    embedding is zeros and never learned, ``seed`` for the initializers (a row's initial
    values depend on the seed, its table and its id only).

    The ids of all tables share one key space: an id names one row, whichever table it is
    looked up through (its table only chooses the initializer of a new row)."""

    def __init__(self, name: str, embedding_dim: int, dtype, key_type, tables,
                 store_options: dict, default_initializer: dict | None = None,
                 padding_idx: int | None = None, seed: int = 0):
        if not isinstance(embedding_dim, int):
            raise TypeError(f"MultiTableEmbedding: embedding_dim must be an int, got "
                            f"{type(embedding_dim).__name__} (MultiTableMultiColumnEmbedding "
                            f"takes a list)")
        super().__init__(name, embedding_dim, dtype, key_type, tables, store_options,
                         default_initializer, padding_idx, seed)


class MultiTableMultiColumnEmbedding(Embedding):
    """As ``MultiTableEmbedding``, with ``embedding_dim`` a list of column widths: a row is
    the columns side by side (``sum(embedding_dim)`` values), each drawn with its column's
    initializer (``make_table_options([make_column_options(init), ...])``)."""

    def __init__(self, name: str, embedding_dim, dtype, key_type, tables,
                 store_options: dict, default_initializer: dict | None = None,
                 padding_idx: int | None = None, seed: int = 0):
        dims = embedding_dim if isinstance(embedding_dim, (list, tuple)) else [embedding_dim]
        if any(not isinstance(d, int) for d in dims):
            raise TypeError(f"MultiTableMultiColumnEmbedding: embedding_dim must be an int or a "
                            f"list of ints, got {embedding_dim!r}")
        super().__init__(name, embedding_dim, dtype, key_type, tables, store_options,
                         default_initializer, padding_idx, seed)
