"""Backward ops of the piecewise activations: ``leaky_relu_grad``, ``hardtanh_grad`` (also
relu6's), ``threshold_grad``, ``shrink_grad`` (hardshrink's and softshrink's) and
``hardsigmoid_grad``.

Each takes ``(dy, x)`` and computes ``dy * f'(x)`` in one pass. On each piece ``f'`` is a
constant, so, as PyTorch's ``*_backward`` ops do, differentiating one of these again gives
``op(ddy, x)`` for ``dy`` and zeros for ``x``: ``x`` is reached (so ``autograd.grad`` of a first
derivative w.r.t. the input answers zeros instead of "not used"). A masked-out element is +0
even where ``dy`` is NaN or infinite (a select, as PyTorch's kernels); a NaN ``x`` fails every
comparison (leaky_relu_grad: the slope's side). Each op has the C form of one element
(``c_expr``): a graph runs it as generated C, alone or fused with its neighbours.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.boxing import elementwise_rule
from actorflow.ops.registry import Meta, fail, register


def _backward_op(name: str, doc: str, kernel, c_expr: str, grad_call):
    """Register the backward op ``name(dy, x)``: ``kernel(dy, x, attrs) -> array`` (the
    reference, alias-safe: it reads both inputs before writing), ``grad_call(ddy, x, attrs)``
    applies the op again (its gradient for ``dy``)."""
    op = register(name, elementwise=True, alias_safe=True, doc=doc, c_expr=c_expr)
    op.sbp(elementwise_rule)

    @op.infer
    def _(inputs, attrs):
        dy, x = inputs
        if tuple(dy._shape) != tuple(x._shape):
            fail(name, "dy and x must have the same shape", dy._shape, x._shape)
        return [Meta(dy._shape, dy.dtype)]

    @op.kernel("cpu")
    def _(ins, outs, attrs):
        with np.errstate(all="ignore"):
            np.copyto(outs[0], kernel(ins[0], ins[1], attrs), casting="unsafe")

    @op.grad
    def _(ctx, ddx):
        x = ctx.inputs[1]
        return grad_call(ddx, x, ctx.attrs), F.zeros_like(x)

    return op


def _leaky(dy, x, attrs):
    return np.where(x > 0, dy, dy * attrs["negative_slope"])


leaky_relu_grad = _backward_op(
    "leaky_relu_grad", "dy where x > 0, else dy * negative_slope (leaky_relu's gradient).",
    _leaky, "({r1} > 0 ? {0} : {0} * {negative_slope})",
    lambda g, x, a: F.leaky_relu_grad(g, x, a["negative_slope"]))

hardtanh_grad = _backward_op(
    "hardtanh_grad", "dy where min_val < x < max_val, else 0 (hardtanh's and relu6's gradient).",
    lambda dy, x, a: np.where((x > a["min_val"]) & (x < a["max_val"]), dy, 0),
    "(({r1} > {min_val} && {r1} < {max_val}) ? {0} : ({T})0)",
    lambda g, x, a: F.hardtanh_grad(g, x, a["min_val"], a["max_val"]))

threshold_grad = _backward_op(
    "threshold_grad", "0 where x <= threshold, else dy (threshold's and relu's gradient; a NaN "
    "x passes dy, as PyTorch's threshold_backward).",
    lambda dy, x, a: np.where(x <= a["threshold"], 0, dy),
    "({r1} <= {threshold} ? ({T})0 : {0})",
    lambda g, x, a: F.threshold_grad(g, x, a["threshold"]))

shrink_grad = _backward_op(
    "shrink_grad", "dy where |x| > lambd, else 0 (hardshrink's and softshrink's gradient).",
    lambda dy, x, a: np.where(np.abs(x) > a["lambd"], dy, 0),
    "(fabs({r1}) > {lambd} ? {0} : ({T})0)",
    lambda g, x, a: F.shrink_grad(g, x, a["lambd"]))

hardsigmoid_grad = _backward_op(
    "hardsigmoid_grad", "dy / 6 where -3 < x < 3, else 0 (hardsigmoid's gradient).",
    lambda dy, x, a: np.where((x > -3) & (x < 3), dy / 6, 0),
    "(({r1} > -3 && {r1} < 3) ? {0} / ({T})6 : ({T})0)",
    lambda g, x, a: F.hardsigmoid_grad(g, x))
