"""OneFlow's option builders of ``flow.one_embedding`` (the dicts their functions return have
OneFlow's layout) and the reading of a store's options.

On a CPU there is no device memory: every store keeps its key index in host memory, and

* ``make_device_mem_store_options`` and ``make_cached_host_mem_store_options`` (a ``"full"``
  cache: the whole table cached) keep the lines in host memory;
* ``make_cached_ssd_store_options`` (``"lru"`` caches only) keeps the lines in a file under
  the persistent path (``<path>/<rank>-<world>/lines.bin``), mapped into memory: the
  operating system's page cache is the cache, and the budgets are not used.

Snapshots of every kind go to the persistent path (``<path>/<rank>-<world>/snapshots/``).
"""
from __future__ import annotations

from actorflow.ops.one_embedding_store import check_initializer


def make_device_mem_store_options(persistent_path, capacity: int, size_factor: int = 1,
                                  storage_dim: int = -1, physical_block_size: int = 4096) -> dict:
    """Store options of a table held whole in memory (on a CPU: host memory), with
    snapshots under ``persistent_path`` (a str: this process's table is
    ``persistent_path/<rank>-<world>``; a list: one table directory per rank).

    ``size_factor``: lines hold ``size_factor * embedding_dim`` values, the embedding and the
    optimizer's state (1 for SGD, 2 for SGD with momentum or Adagrad, 3 for Adam or Ftrl);
    ``storage_dim`` (when not -1) gives the line width instead. ``physical_block_size`` is
    the disk sector size OneFlow aligns its files to (512 or 4096; checked, not needed)."""
    _check_path(persistent_path)
    if capacity <= 0:
        raise ValueError(f"make_device_mem_store_options: capacity must be > 0, got {capacity}")
    return {"kv_store": {"caches": [{"policy": "full", "capacity": int(capacity),
                                     "value_memory_kind": "device"}],
                         "persistent_table": {"path": persistent_path,
                                              "physical_block_size": physical_block_size,
                                              "capacity_hint": int(capacity)}},
            "size_factor": size_factor, "storage_dim": storage_dim}


def make_cached_ssd_store_options(cache_budget_mb, persistent_path, capacity=None,
                                  size_factor: int = 1, storage_dim: int = -1,
                                  physical_block_size: int = 4096,
                                  host_cache_budget_mb=0) -> dict:
    """Store options of a table kept on disk under ``persistent_path`` with memory caches of
    ``cache_budget_mb`` (device) and ``host_cache_budget_mb`` MB (at least one > 0). On a CPU
    the lines live in a memory-mapped file under the persistent path (see the module
    docstring); ``capacity`` is a hint. Other arguments as in
    ``make_device_mem_store_options``."""
    _check_path(persistent_path)
    if not (cache_budget_mb > 0 or host_cache_budget_mb > 0):
        raise ValueError("make_cached_ssd_store_options: cache_budget_mb or "
                         "host_cache_budget_mb must be > 0")
    if capacity is not None and capacity <= 0:
        raise ValueError(f"make_cached_ssd_store_options: capacity must be > 0, got {capacity}")
    caches = []
    if cache_budget_mb > 0:
        caches.append({"policy": "lru", "cache_memory_budget_mb": cache_budget_mb,
                       "value_memory_kind": "device"})
    if host_cache_budget_mb > 0:
        caches.append({"policy": "lru", "cache_memory_budget_mb": host_cache_budget_mb,
                       "value_memory_kind": "host"})
    return {"kv_store": {"caches": caches,
                         "persistent_table": {"path": persistent_path,
                                              "physical_block_size": physical_block_size,
                                              "capacity_hint": int(capacity or 0)}},
            "size_factor": size_factor, "storage_dim": storage_dim}


def make_cached_host_mem_store_options(cache_budget_mb, persistent_path, capacity: int,
                                       size_factor: int = 1, storage_dim: int = -1,
                                       physical_block_size: int = 4096) -> dict:
    """Store options of a table held whole in host memory behind a device cache of
    ``cache_budget_mb`` MB (on a CPU: the table in host memory). Other arguments as in
    ``make_device_mem_store_options``."""
    _check_path(persistent_path)
    if cache_budget_mb <= 0 or capacity <= 0:
        raise ValueError(f"make_cached_host_mem_store_options: cache_budget_mb and capacity must "
                         f"be > 0, got {cache_budget_mb} and {capacity}")
    return {"kv_store": {"caches": [{"policy": "lru", "cache_memory_budget_mb": cache_budget_mb,
                                     "value_memory_kind": "device"},
                                    {"policy": "full", "capacity": int(capacity),
                                     "value_memory_kind": "host"}],
                         "persistent_table": {"path": persistent_path,
                                              "physical_block_size": physical_block_size,
                                              "capacity_hint": int(capacity)}},
            "size_factor": size_factor, "storage_dim": storage_dim}


def make_uniform_initializer(low: float = 0.0, high: float = 1.0) -> dict:
    """An initializer drawing each value uniformly from ``[low, high)``."""
    return {"type": "uniform", "low": low, "high": high}


def make_normal_initializer(mean: float = 0.0, std: float = 1.0) -> dict:
    """An initializer drawing each value from the normal distribution ``N(mean, std**2)``."""
    return {"type": "normal", "mean": mean, "std": std}


def make_constant_initializer(value: float) -> dict:
    """An initializer setting every value to ``value``."""
    return {"type": "constant", "value": value}


def make_trunc_normal_initializer(mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                                  b: float = 2.0) -> dict:
    """An initializer drawing from ``N(mean, std**2)`` truncated to ``[a, b]``."""
    return {"type": "trunc_normal", "mean": mean, "std": std, "a": a, "b": b}


def make_column_options(initializer: dict) -> dict:
    """The options of one column of a table (its initializer)."""
    return {"initializer": initializer}


def make_table_options(param) -> dict:
    """The options of one table: an initializer (every column) or a list of column options."""
    if isinstance(param, dict):
        return {"initializer": param}
    if isinstance(param, (list, tuple)):
        return {"columns": list(param)}
    raise ValueError(f"make_table_options: param must be an initializer or a list of column "
                     f"options, got {type(param).__name__}")


make_table = make_table_options


def _check_path(path) -> None:
    if not isinstance(path, (str, list, tuple)):
        raise TypeError(f"one_embedding: persistent_path must be a str or a list of str, got "
                        f"{type(path).__name__}")


def table_initializers(tables, column_dims: list, default_initializer) -> list:
    """Each table's column initializers (a list per table), checked."""
    default = default_initializer or {"type": "normal", "mean": 0, "std": 0.05}
    if tables is None:
        return [[check_initializer(default)] * len(column_dims)]
    if not isinstance(tables, (list, tuple)) or not tables:
        raise ValueError("one_embedding: tables must be a non-empty list of table options "
                         "(make_table_options)")
    out = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise ValueError(f"one_embedding: table {i} is not a dict of table options")
        if "columns" in table:
            if "initializer" in table:
                raise ValueError(f"one_embedding: table {i} gives both columns and initializer")
            cols = table["columns"]
            if len(cols) != len(column_dims):
                raise ValueError(f"one_embedding: table {i} has {len(cols)} columns, the "
                                 f"embedding {len(column_dims)}")
            out.append([check_initializer(c.get("initializer")) for c in cols])
        elif "initializer" in table:
            out.append([check_initializer(table["initializer"])] * len(column_dims))
        else:
            raise ValueError(f"one_embedding: table {i} has neither initializer nor columns")
    return out


def read_store_options(store_options: dict, embedding_dim: int) -> dict:
    """``{"storage_dim", "path" (a str or list), "on_file", "capacity_hint"}`` of
    ``store_options`` (made by the ``make_*_store_options`` functions), checked."""
    try:
        kv = store_options["kv_store"]
        table = kv["persistent_table"]
        path = table["path"]
        caches = kv.get("caches", [])
        caches = [caches] if isinstance(caches, dict) else list(caches)
        size_factor = store_options.get("size_factor", 1)
        storage_dim = store_options.get("storage_dim", -1)
    except (KeyError, TypeError):
        raise ValueError("one_embedding: store_options must come from make_device_mem_store_"
                         "options, make_cached_ssd_store_options or make_cached_host_mem_store_"
                         "options") from None
    _check_path(path)
    if len(caches) > 2 or any(c.get("policy") not in ("lru", "full") for c in caches):
        raise ValueError(f"one_embedding: at most two caches of policy 'lru' or 'full', got "
                         f"{caches}")
    if table.get("physical_block_size", 4096) not in (512, 4096):
        raise ValueError(f"one_embedding: physical_block_size must be 512 or 4096, got "
                         f"{table['physical_block_size']}")
    dim = int(storage_dim) if storage_dim != -1 else int(size_factor) * embedding_dim
    if dim < embedding_dim:
        raise ValueError(f"one_embedding: storage_dim {dim} is smaller than embedding_dim "
                         f"{embedding_dim}")
    return {"storage_dim": dim, "path": path,
            "on_file": not any(c["policy"] == "full" for c in caches),
            "capacity_hint": int(table.get("capacity_hint", 0) or 0)}
