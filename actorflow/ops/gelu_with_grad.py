"""``gelu_with_grad``: gelu(x) and its gradient ``dout * gelu'(x)`` in one op.

No user calls it: the graph compiler puts it in place of gelu's gradient when it recomputes
gelu's output for the backward (``compiler/codegen/recompute.py``, gelu's ``recompute_grad``
trait, set in ``ops/activation.py``), so that one generated loop computes Phi(x) once for
both values, where the recomputed gelu and gelu_grad each computed it. Its NumPy kernel runs
gelu's and gelu_grad's.
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops.boxing import Sig, elementwise_rule
from actorflow.ops.gelu_f32 import gelu_with_grad_c_row
from actorflow.ops.registry import Meta, fail, get, register

# Not marked ``elementwise``: that trait lets the fusion passes make the op a step of a fused
# program, and a program step has one output (this op never reaches those passes anyway).
gelu_with_grad = register(
    "gelu_with_grad",
    doc="(gelu(x), dout * gelu'(x)) from inputs (dout, x): a recomputed gelu and its gradient "
        "in one kernel (the graph compiler's rewrite of gelu_grad; attr approximate).")


@gelu_with_grad.infer
def _(inputs, attrs):
    if len(inputs) != 2:
        fail("gelu_with_grad", f"takes (dout, x), got {len(inputs)} inputs",
             *[t._shape for t in inputs])
    g, x = inputs
    if tuple(g._shape) != tuple(x._shape):
        fail("gelu_with_grad", "dout and x must have one shape", g._shape, x._shape)
    if attrs.get("approximate") not in ("none", "tanh"):
        fail("gelu_with_grad", f"approximate must be 'none' or 'tanh', got "
             f"{attrs.get('approximate')!r}", x._shape)
    d = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    return [Meta(x._shape, d), Meta(x._shape, x.dtype)]  # as gelu's and gelu_grad's


@gelu_with_grad.sbp
def _(inputs, attrs):
    """Elementwise; both outputs are laid out as x."""
    for sig in elementwise_rule(inputs, attrs):
        yield Sig(sig.ins, sig.outs * 2)


@gelu_with_grad.kernel("cpu")
def _(ins, outs, attrs):
    g, x = ins
    y, dx = outs
    if np.may_share_memory(x, y) or np.may_share_memory(x, dx) or np.may_share_memory(g, y):
        g, x = g.copy(), x.copy()  # both kernels below read x; the grad reads g after y exists
    get("gelu").kernel_cpu([x], [y], attrs)
    get("gelu_grad").kernel_cpu([g, x], [dx], attrs)


gelu_with_grad.c_row = gelu_with_grad_c_row
