"""Comparisons, logical and bitwise ops (bool or integer results, no gradient), ``isclose``,
and selection by a mask: ``where``, ``masked_fill`` and ``fill`` (split from
``actorflow/ops/elementwise.py``, which holds the ``binary`` factory they use).
"""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import (
    F, broadcast_shapes, promote,
)
from actorflow.ops.int_scalars import check_int_scalar, int_scalar
from actorflow.ops.boxing import Sig, elementwise_rule
from actorflow.ops.registry import Meta, fail, register
from actorflow.ops.elementwise import _integral_only, _needs, binary, c_scalar

# comparisons and logical ops: bool results, no gradient
eq, scalar_eq = binary("eq", np.equal, kind="bool", complex_ok=True)
ne, scalar_ne = binary("ne", np.not_equal, kind="bool", complex_ok=True)
lt, scalar_lt = binary("lt", np.less, kind="bool")
le, scalar_le = binary("le", np.less_equal, kind="bool")
gt, scalar_gt = binary("gt", np.greater, kind="bool")
ge, scalar_ge = binary("ge", np.greater_equal, kind="bool")
logical_and, scalar_logical_and = binary("logical_and", np.logical_and, kind="bool")
logical_or, scalar_logical_or = binary("logical_or", np.logical_or, kind="bool")
logical_xor, scalar_logical_xor = binary("logical_xor", np.logical_xor, kind="bool")

# one element in generated C (ops/registry.py: c_expr); comparisons read the raw inputs
for _op, _sop, _c in ((eq, scalar_eq, "=="), (ne, scalar_ne, "!="), (lt, scalar_lt, "<"),
                      (le, scalar_le, "<="), (gt, scalar_gt, ">"), (ge, scalar_ge, ">=")):
    _op.c_expr = "({r0} %s {r1})" % _c
    _sop.c_expr = c_scalar("({r0} %s {scalar})" % _c, "({scalar} %s {r0})" % _c)
logical_and.c_expr = "({0} && {1})"
logical_or.c_expr = "({0} || {1})"
logical_xor.c_expr = "({0} != {1})"

bitwise_and, scalar_bitwise_and = binary("bitwise_and", np.bitwise_and, elementwise=False)
bitwise_or, scalar_bitwise_or = binary("bitwise_or", np.bitwise_or, elementwise=False)
bitwise_xor, scalar_bitwise_xor = binary("bitwise_xor", np.bitwise_xor, elementwise=False)
_integral_only(bitwise_and, scalar_bitwise_and, bitwise_or, scalar_bitwise_or, bitwise_xor,
               scalar_bitwise_xor)

isclose = register("isclose", doc="|x - y| <= atol + rtol * |y| elementwise (bool).")


@isclose.infer
def _(inputs, attrs):
    x, y = inputs
    return [Meta(broadcast_shapes("isclose", x._shape, y._shape), dt.bool_)]


isclose.sbp(elementwise_rule)


@isclose.kernel("cpu")
def _(ins, outs, attrs):
    x, y = ins
    d = np.result_type(x, y)
    if d.kind not in "fc":
        d = np.float64
    with np.errstate(all="ignore"):
        outs[0][...] = np.isclose(x.astype(d, copy=False), y.astype(d, copy=False),
                                  rtol=attrs["rtol"], atol=attrs["atol"],
                                  equal_nan=attrs["equal_nan"])


# ---- where, masked_fill, fill ------------------------------------------------------------------

where = register("where", doc="x where cond else y (broadcasting all three).", elementwise=True,
                 c_expr="({r0} ? {1} : {2})")
where.sbp(elementwise_rule)


@where.infer
def _(inputs, attrs):
    c, x, y = inputs
    shape = broadcast_shapes("where", c._shape, x._shape, y._shape)
    return [Meta(shape, x.dtype if x.dtype is y.dtype else promote([x, y]))]


def _as_bool(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == np.bool_ else a.astype(bool)


@where.kernel("cpu")
def _(ins, outs, attrs):
    c, x, y = ins
    np.copyto(outs[0], y, casting="unsafe")
    np.copyto(outs[0], x, casting="unsafe", where=_as_bool(c))


@where.grad
def _(ctx, g):
    c = ctx.inputs[0]
    _, (sx, _), (sy, _) = ctx.input_metas
    dx = F.sum_to(F.where(c, g, 0.0), sx) if _needs(ctx, 1) else None
    dy = F.sum_to(F.where(c, 0.0, g), sy) if _needs(ctx, 2) else None
    return None, dx, dy


masked_fill = register("masked_fill", elementwise=True, alias_safe=True,
                       doc="x with ``value`` where mask is true (broadcasting).")
masked_fill.sbp(elementwise_rule)


@masked_fill.infer
def _(inputs, attrs):
    x, mask = inputs
    if mask.dtype._category >= 2:  # PyTorch takes bool masks; integer ones as OneFlow
        fail("masked_fill", f"the mask must be a bool tensor, got {mask.dtype}")
    check_int_scalar("masked_fill", attrs["value"], x.dtype, exact=True)
    return [Meta(broadcast_shapes("masked_fill", x._shape, mask._shape), x.dtype)]


@masked_fill.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    np.copyto(out, ins[0])
    np.copyto(out, np.asarray(int_scalar(attrs["value"], out.dtype)), casting="unsafe",
              where=_as_bool(ins[1]))


@masked_fill.grad
def _(ctx, g):
    x, mask = ctx.inputs
    return F.sum_to(F.masked_fill(g, mask, 0), ctx.input_metas[0][0]), None


fill = register("fill", doc="A tensor like x filled with ``value`` (used in place as fill_).")


@fill.infer
def _(inputs, attrs):
    check_int_scalar("fill", attrs["value"], inputs[0].dtype, exact=True)
    return [Meta(inputs[0]._shape, inputs[0].dtype)]


@fill.kernel("cpu")
def _(ins, outs, attrs):
    out = outs[0]
    np.copyto(out, np.asarray(int_scalar(attrs["value"], out.dtype)), casting="unsafe")


@fill.sbp
def _(inputs, attrs):
    # every shard of a split tensor takes the value; partial sums only for 0 (zero_)
    x = inputs[0].sbp[0].attr()
    if x[0] == "S" or (x == ("P",) and attrs["value"] == 0):
        yield Sig((x,), (x,))


@fill.grad
def _(ctx, g):
    return F.zeros_like(g)
