"""``flow.one_embedding`` (OneFlow's) on the CPU: embeddings of many sparse ids whose rows live
in a key-value store, created on first lookup and updated only where looked up.

* ``options``: the store options (``make_device_mem_store_options``,
  ``make_cached_ssd_store_options``, ``make_cached_host_mem_store_options``), initializers
  and table options;
* ``embedding``: ``MultiTableEmbedding``, ``MultiTableMultiColumnEmbedding`` (forward,
  ``save_snapshot``, ``load_snapshot``);
* ``optimizer``: ``Optimizer`` (OneFlow's wrapper for eager training); ``ftrl``: ``Ftrl``;
* ``persistent``: ``make_persistent_table_reader`` / ``make_persistent_table_writer``.
"""
from actorflow.one_embedding.embedding import (  # noqa: F401
    Embedding, MultiTableEmbedding, MultiTableMultiColumnEmbedding)
from actorflow.one_embedding.ftrl import Ftrl  # noqa: F401
from actorflow.one_embedding.optimizer import Optimizer  # noqa: F401
from actorflow.one_embedding.options import (  # noqa: F401
    make_cached_host_mem_store_options, make_cached_ssd_store_options, make_column_options,
    make_constant_initializer, make_device_mem_store_options, make_normal_initializer,
    make_table, make_table_options, make_trunc_normal_initializer, make_uniform_initializer)
from actorflow.one_embedding.persistent import (  # noqa: F401
    PersistentTableReader, PersistentTableWriter, make_persistent_table_reader,
    make_persistent_table_writer)
