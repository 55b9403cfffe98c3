"""How an optimizer update op computes ONE element, as data on its op record (``Op.c_update``).

An update op's NumPy kernel (``ops/optim_ops.py``) is the reference; beside it, the op's
``c_update(attrs) -> UpdateForm | None`` says the same computation per element in C, which the
graph's code generator (``actorflow/compiler/codegen/update.py``) inlines into one loop over all
parameters of a ``multi_tensor_update``. Nothing about any optimizer is written in the generator.

The C statements of ``body`` see, per element, the locals ``p`` (parameter), ``g`` (gradient)
and ``s0``, ``s1``... (the state inputs after lr and step, in input order), all of the
parameter's C type ``T`` (``float`` or ``double``), and one ``const T`` per name of ``scalars``.
They assign the new values to ``p`` and the state locals; the generator stores the ones named in
``writes``. ``scalars(lr, step, attrs)`` gives those scalars as Python floats for one call (lr
and bias corrections change every step, so they are arguments of the kernel, never literals in
its source); the kernel converts each to ``T`` first, as NumPy converts a Python float to the
array's dtype before it computes, so each C operation is the one the NumPy kernel does on the
same operands: with FMA contraction off the two give the same bits.
"""
from __future__ import annotations

from typing import Callable, NamedTuple


class UpdateForm(NamedTuple):
    """One update op call's per-element C form (see the module docstring).

    * ``body``: C statements over ``p``, ``g``, ``s0``..., the scalars, of type ``T``;
    * ``names``: the scalar names, in the order ``scalars`` returns their values;
    * ``scalars(lr, step, attrs) -> tuple[float, ...]``: their values for one call (``step``
      is the advanced step count, or None for an op without a step input);
    * ``n_state``: how many state arrays follow lr (and step);
    * ``has_step``: input 3 is a 0-d int64 step count the call advances first;
    * ``writes``: the locals stored back (``"p"``, ``"s0"``...).
    """

    body: str
    names: tuple
    scalars: Callable
    n_state: int
    has_step: bool
    writes: tuple


__all__ = ["UpdateForm"]
