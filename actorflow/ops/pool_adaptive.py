"""Adaptive max pooling (1-d, 2-d, 3-d).

Output cell ``i`` of a dim of length ``L`` pooled to ``o`` covers ``floor(i*L/o) ..
ceil((i+1)*L/o)`` (the bins of adaptive average pooling). The op outputs the maxima and their
argmax as a flat index into each (N, C) spatial plane, so the gradient is the scatter of
``max_pool{n}d_grad`` (and its double backward the gather of that op's rule).
"""
from __future__ import annotations

import itertools

import numpy as np

from actorflow.framework.dtype import int64
from actorflow.ops._common import F
from actorflow.ops.pool import plane_rule
from actorflow.ops.registry import Meta, fail, register


def adaptive_bins(length: int, o: int) -> list:
    """``(start, end)`` of each of the ``o`` adaptive bins over ``length`` positions."""
    return [((i * length) // o, -((-(i + 1) * length) // o)) for i in range(o)]


def _forward(x: np.ndarray, out: np.ndarray, idx_out: np.ndarray) -> None:
    in_sizes, outs = x.shape[2:], out.shape[2:]
    bins = [adaptive_bins(L, o) for L, o in zip(in_sizes, outs)]
    lead = x.shape[:2]
    for cell in itertools.product(*(range(o) for o in outs)):
        spans = [bins[d][c] for d, c in enumerate(cell)]
        win = x[(Ellipsis,) + tuple(slice(s, e) for s, e in spans)]
        flat = win.reshape(lead + (-1,))
        arg = np.argmax(flat, axis=-1)
        out[(Ellipsis,) + cell] = np.take_along_axis(flat, arg[..., None], axis=-1)[..., 0]
        pos = np.unravel_index(arg, tuple(e - s for s, e in spans))
        index = np.zeros(arg.shape, np.int64)
        for d, (s, _) in enumerate(spans):
            index = index * in_sizes[d] + (pos[d] + s)
        idx_out[(Ellipsis,) + cell] = index


def _register(n: int) -> None:
    op = register(f"adaptive_max_pool{n}d", grad_uses_outputs=True,
                  doc=f"{n}-d adaptive max pooling to attr output_size; outputs the maxima and "
                      f"their argmax (flat index into each spatial plane).")

    @op.infer
    def _(inputs, attrs):
        x = inputs[0]
        size = tuple(attrs["output_size"])
        if len(x._shape) != n + 2:
            fail(op.name, f"expected a {n + 2}-d input (batch, channels, {n} spatial dims)",
                 x._shape)
        if len(size) != n or any(s <= 0 for s in size):
            fail(op.name, f"output_size must be {n} positive ints, got {size}", x._shape)
        if any(L == 0 for L in x._shape[2:]):
            fail(op.name, "spatial dims of the input must be non-empty", x._shape)
        shape = tuple(x._shape[:2]) + size
        return [Meta(shape, x.dtype), Meta(shape, int64)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        _forward(ins[0], outs[0], outs[1])

    @op.grad
    def _(ctx, dout, _didx):
        return F.max_pool_grad(dout, ctx.outputs[1], ctx.input_metas[0][0], ctx.inputs[0])


    op.sbp(plane_rule(2))


for _n in (1, 2, 3):
    _register(_n)
