"""Ops that exist for graph structure: ``depend`` (order one computation before another).

``depend(x, d0, d1, ...)`` returns ``x`` unchanged; in a Job it reads ``d0, d1...`` too, so
whatever consumes its output runs after they are computed. Eagerly ``functional.depend``
returns ``x`` itself and never calls the op (as in OneFlow), so the op only appears in Jobs.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops.registry import Meta, fail, register

depend = register("depend", doc="Input 0 unchanged, ordered after the other inputs "
                                "(a data edge standing for a control edge).")


@depend.infer
def _(inputs, attrs):
    if len(inputs) < 2:
        fail("depend", "expected the input and at least one tensor to depend on",
             *[t._shape for t in inputs])
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


@depend.kernel("cpu")
def _(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


@depend.grad
def _(ctx, dout):
    return (dout,) + (None,) * (len(ctx.input_metas) - 1)
