"""The functional side of ``flow.one_embedding`` (ops in ``actorflow/ops/one_embedding.py``):
the lookup of ids in an embedding's store, and its gradient, which the lookup's gradient rule
calls."""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from actorflow.tensor import Tensor

__all__ = ["one_embedding_lookup", "one_embedding_grad"]

_LOOKUP = registry.get("one_embedding_lookup")
_GRAD = registry.get("one_embedding_grad")


def one_embedding_lookup(shadow: Tensor, ids: Tensor, table_ids: Tensor | None,
                         embedding_name: str, embedding_dim: int, num_tables: int,
                         dtype=None, padding_idx: int | None = None) -> Tensor:
    """The embeddings of ``ids`` (shape ``ids.shape + (embedding_dim,)``) in the store of
    embedding ``embedding_name``; ``shadow`` is the embedding's one-element parameter (its
    gradient carries the rows' gradients to the optimizer)."""
    inputs = [shadow, ids] + ([table_ids] if table_ids is not None else [])
    attrs = {"embedding_name": str(embedding_name), "embedding_dim": int(embedding_dim),
             "num_tables": int(num_tables),
             "dtype": dt.as_dtype(dtype) if dtype is not None else shadow.dtype,
             "padding_idx": None if padding_idx is None else int(padding_idx)}
    return apply(_LOOKUP, inputs, attrs)[0]


def one_embedding_grad(dout: Tensor, ids: Tensor, shadow: Tensor, embedding_name: str,
                       padding_idx: int | None = None) -> Tensor:
    """Keep ``dout``'s rows for the next update of the store; returns the shadow's gradient
    (one zero of its shape)."""
    return apply(_GRAD, [dout, ids, shadow],
                 {"embedding_name": str(embedding_name), "padding_idx": padding_idx})[0]
