"""The ops of ``flow.one_embedding``: a lookup, its gradient and the update of the looked-up
rows, over the key-value stores of ``one_embedding_store`` (found by the embedding's name).

* ``one_embedding_lookup(shadow, ids[, table_ids])`` -> ``ids.shape + (embedding_dim,)``:
  each id's embedding, its row created on first lookup. ``shadow`` is the embedding's
  one-element parameter: the lookup reads it, so it follows the previous update (which
  writes it), and its gradient carries the rows' gradients to the optimizer.
* ``one_embedding_grad(dout, ids)`` -> one zero of the shadow's shape (the shadow's
  gradient): keeps ``dout``'s rows for the next update of the store (gradients of several
  lookups before an update add up, as gradients accumulate).
* ``one_embedding_update(shadow, shadow_grad, lr, [step], state...)``: the inputs of a dense
  update op for the shadow (``attrs["update"]``, one with the ``optimizer_update`` and
  ``elementwise`` traits: SGD with or without momentum, Adam/AdamW/AMSGrad, Adagrad,
  RMSprop, Adadelta, FTRL; not LAMB, whose trust ratio needs whole-parameter norms). It runs
  that op's own kernel on the rows the pending gradients name (summed per key) and their state
  slots, so a row is updated exactly as a dense parameter's row would be; rows no gradient
  names are left alone. The shadow's state tensors keep the optimizer's initial state
  values (they are never updated): a row's state slots start from them.

The kernels read and write the stores (state outside the tensors); the data edges
lookup -> grad -> update and the shadow, written by the update and read by the next lookup,
order every access, eagerly and in a compiled graph.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops import one_embedding_store as stores
from actorflow.ops import registry
from actorflow.ops._common import F
from actorflow.ops.registry import Meta, fail, register


def row_update_ok(op) -> bool:
    """Whether dense update op ``op`` can update rows: a registered update op
    (``optimizer_update``) whose elements are updated independently (``elementwise``), so
    running it on the looked-up rows is the dense update of those rows."""
    return bool(op.optimizer_update and op.elementwise)


def _table_ids(ids: np.ndarray, table_ids, num_tables: int) -> np.ndarray:
    if table_ids is not None:
        return table_ids.reshape(-1).astype(np.int64, copy=False)
    if num_tables == 1:
        return np.zeros(ids.size, np.int64)
    # ids of shape (..., num_tables): column j's ids belong to table j
    return np.broadcast_to(np.arange(num_tables), ids.shape).reshape(-1)


# ---- lookup --------------------------------------------------------------------------------------

one_embedding_lookup = register(
    "one_embedding_lookup",
    doc="Embedding lookup in a one_embedding store: inputs (shadow, ids[, table_ids]); attrs "
        "embedding_name, embedding_dim, num_tables, dtype, padding_idx (None or an id whose "
        "embedding is zeros and never learned). Output ids.shape + (embedding_dim,). A row "
        "missing from the store is created with its table's initializers. Without table_ids, "
        "ids of shape (..., num_tables) take table j for column j (or table 0 with one table).")


def _check_ids(op: str, ids, table_ids, num_tables: int) -> None:
    if ids.dtype._category != 1:
        fail(op, f"ids must have an integer dtype, got {ids.dtype}", ids._shape)
    if table_ids is not None:
        if table_ids.dtype._category != 1:
            fail(op, f"table_ids must have an integer dtype, got {table_ids.dtype}",
                 table_ids._shape)
        if tuple(table_ids._shape) != tuple(ids._shape):
            fail(op, "table_ids must have the shape of ids", ids._shape, table_ids._shape)
    elif num_tables > 1 and (len(ids._shape) < 1 or ids._shape[-1] != num_tables):
        fail(op, f"with {num_tables} tables and no table_ids, ids must have shape "
             f"(..., {num_tables}); pass table_ids", ids._shape)


@one_embedding_lookup.infer
def _(inputs, attrs):
    if len(inputs) not in (2, 3):
        fail("one_embedding_lookup", f"expected (shadow, ids[, table_ids]), got {len(inputs)} "
             f"inputs")
    _check_ids("one_embedding_lookup", inputs[1], inputs[2] if len(inputs) == 3 else None,
               attrs["num_tables"])
    return [Meta(tuple(inputs[1]._shape) + (attrs["embedding_dim"],), attrs["dtype"])]


@one_embedding_lookup.kernel("cpu")
def _(ins, outs, attrs):
    store = stores.get(attrs["embedding_name"])
    ids = ins[1].reshape(-1)
    tids = _table_ids(ins[1], ins[2] if len(ins) == 3 else None,
                      attrs["num_tables"])
    pad = attrs.get("padding_idx")
    rows = store.rows(ids, tids, skip=pad)
    out = outs[0].reshape(-1, store.embedding_dim)
    out[...] = store.lines[np.maximum(rows, 0), :store.embedding_dim]
    if pad is not None:
        out[rows < 0] = 0


@one_embedding_lookup.grad
def _(ctx, dout):
    if dout is None or not ctx.needs_input_grad[0]:
        return [None] * len(ctx.inputs)
    grad = F.one_embedding_grad(dout, ctx.inputs[1], ctx.inputs[0], ctx.attrs["embedding_name"],
                                ctx.attrs.get("padding_idx"))
    return [grad] + [None] * (len(ctx.inputs) - 1)


# ---- gradient ------------------------------------------------------------------------------------

one_embedding_grad = register(
    "one_embedding_grad",
    doc="The gradient of one_embedding_lookup: inputs (dout, ids, shadow); attrs "
        "embedding_name, padding_idx. Keeps dout's rows (one per id, padding ids left out) in "
        "the store for its next one_embedding_update; the output is one zero of the shadow's "
        "shape and dtype (the shadow's gradient, which carries the order to the update).")


@one_embedding_grad.infer
def _(inputs, attrs):
    dout, ids, shadow = inputs
    if tuple(dout._shape[:-1]) != tuple(ids._shape):
        fail("one_embedding_grad", "dout must have the shape ids.shape + (embedding_dim,)",
             dout._shape, ids._shape)
    return [Meta(tuple(shadow._shape), shadow.dtype)]


@one_embedding_grad.kernel("cpu")
def _(ins, outs, attrs):
    store = stores.get(attrs["embedding_name"])
    keys = ins[1].reshape(-1)
    grads = ins[0].reshape(-1, store.embedding_dim)
    pad = attrs.get("padding_idx")
    if pad is not None:
        keep = keys != pad
        keys, grads = keys[keep], grads[keep]
    store.push(keys, grads)
    outs[0][...] = 0


# ---- update --------------------------------------------------------------------------------------

def _mutated(n_inputs: int, attrs: dict) -> tuple:
    return (0, 3) if attrs["has_step"] else (0,)


one_embedding_update = register(
    "one_embedding_update", mutates=(0, 3), mutates_fn=_mutated,
    doc="Update the rows of a one_embedding store that got gradients since its last update: "
        "inputs those of the dense update op attrs['update'] for the shadow (shadow, its "
        "gradient, lr, [step], state...); attrs embedding_name, update, update_attrs, has_step. "
        "Runs the dense op's kernel on the rows (gradients summed per key) and their state slots "
        "(started from the state inputs' values); the step counter advances once.")


@one_embedding_update.infer
def _(inputs, attrs):
    name = attrs["update"]
    if not row_update_ok(registry.get(name)):
        fail("one_embedding_update", f"{name} can't update one_embedding rows: it is not an "
             f"elementwise optimizer update")
    n_fixed = 4 if attrs["has_step"] else 3
    if len(inputs) < n_fixed:
        fail("one_embedding_update", f"expected at least {n_fixed} inputs, got {len(inputs)}")
    lr = inputs[2]
    if int(np.prod(lr._shape)) != 1 or not lr.dtype.is_floating_point:
        fail("one_embedding_update", "lr must be a one-element floating point tensor", lr._shape)
    return []


@one_embedding_update.kernel("cpu")
def _(ins, outs, attrs):
    store = stores.get(attrs["embedding_name"])
    n_fixed = 4 if attrs["has_step"] else 3
    states = ins[n_fixed:]
    d = store.embedding_dim
    need = d * (1 + len(states))
    if store.storage_dim < need:
        raise ValueError(f"one_embedding {store.name!r}: {attrs['update']} keeps {len(states)} "
                         f"state slot(s) per row, so storage_dim must be at least {need} "
                         f"(size_factor {1 + len(states)}), got {store.storage_dim}")
    _, grads, rows = store.pop_pending()
    lines = np.array(store.lines[rows], copy=True)
    fresh = ~store.ready[rows]
    for j, s in enumerate(states):
        lines[fresh, d * (j + 1):d * (j + 2)] = s.reshape(-1)[0]
    param = np.ascontiguousarray(lines[:, :d])
    slots = [np.ascontiguousarray(lines[:, d * (j + 1):d * (j + 2)]) for j in range(len(states))]
    kernel = registry.get(attrs["update"]).kernels["cpu"]
    kernel([param, grads, ins[2]] + list(ins[3:n_fixed]) + slots, [], attrs["update_attrs"])
    if len(rows):
        store.lines[rows, :d] = param
        for j, s in enumerate(slots):
            store.lines[rows, d * (j + 1):d * (j + 2)] = s
        store.ready[rows] = True


__all__ = ["row_update_ok"]
