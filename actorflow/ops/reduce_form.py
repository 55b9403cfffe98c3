"""How an op reduces every element of all its inputs to one value, as data on its op record
(``Op.c_reduce``): the gradient norm of clipping (``grad_norm``, ``ops/clip_grad_ops.py``).

The op's NumPy kernel is the reference; beside it, ``c_reduce(attrs) -> ReduceForm | None``
says the same reduction in C, which the graph's code generator
(``actorflow/compiler/codegen/reduce.py``) wraps in one pass over the flat buffers of all the
inputs, split into chunks over the C pool's threads. Nothing about any op is written in the
generator.

A reduction keeps *accumulators* (``accs``: name, C type, initial value, the ``omp simd``
reduction operator that may reorder it). Each input's elements, loaded as the computing type
``T`` (``float`` for float32 / float16 / bfloat16, ``double`` for float64) into the local
``x``, go through ``body`` in blocks of a few thousand, each block into fresh accumulators
that ``merge`` then folds into the input's own (``merge`` reads the other partial's
accumulators as ``<name>_b``); chunks of one input are merged the same way, in order. Then
``value`` (a C expression over the accumulators) gives the input's value as a double,
``total`` (statements) folds it, the local ``v``, into the double ``t`` (starting at
``init``), and ``final`` (an expression over ``t``) is the result the kernel returns; the
caller stores it into the 0-d output as the NumPy kernel does (``out[...] = value``).
Besides ``<tgmath.h>`` the C may call ``AF_ISNAN(v)`` (a NaN test on the bits of a float or
double, which stays vectorisable where ``v != v`` on a converted half is not).
"""
from __future__ import annotations

from typing import NamedTuple


class ReduceForm(NamedTuple):
    """One call's reduction in C (see the module docstring).

    * ``accs``: ``((name, ctype, init, simd), ...)``; ``ctype`` ``"T"`` (the computing type),
      ``"double"`` or ``"int"``; ``simd`` an ``omp simd reduction`` operator (``"+"``,
      ``"max"``, ``"|"``) or ``""`` (the block loop is then not marked for reordering);
    * ``body``: C statements per element ``x`` updating the accumulators;
    * ``merge``: C statements folding partial accumulators ``<name>_b`` into ``<name>``;
    * ``value``: C expression, one input's value (a double) from its accumulators;
    * ``init``: C expression, the starting value of the double total ``t``;
    * ``total``: C statements folding one input's value ``v`` into ``t``;
    * ``final``: C expression of the result from ``t``.
    """

    accs: tuple
    body: str
    merge: str
    value: str
    init: str
    total: str
    final: str


__all__ = ["ReduceForm"]
