"""Binary math ops beyond the four arithmetic ones (split from ``actorflow/ops/elementwise.py``,
which holds the ``binary`` / ``unary`` factories): floor_divide, remainder, fmod, pow, maximum,
minimum and atan2, each in a tensor-tensor and a tensor-scalar form.

Gradients of non-differentiable (piecewise constant) results are zeros, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import (
    F,
)
from actorflow.framework import dtype as dt
from actorflow.ops.int_scalars import is_int_scalar
from actorflow.ops.elementwise import _binary_infer, _needs, _quiet, binary, c_scalar, refuse_bool
from actorflow.ops.registry import Meta

floor_divide, scalar_floor_divide = binary(
    "floor_divide", _quiet(np.floor_divide, int_divisor=True),
    grad=lambda ctx, g, x, y: (F.zeros_like(g) if _needs(ctx, 0) else None,
                               F.zeros_like(g) if _needs(ctx, 1) else None),
    scalar_grad=lambda ctx, g, s, rev: F.zeros_like(g), grad_reads_inputs=False)

# remainder has the sign of the divisor (Python's %); fmod the sign of the dividend (C's fmod)
remainder, scalar_remainder = binary(
    "remainder", _quiet(np.remainder, int_divisor=True),
    grad=lambda ctx, g, x, y: (g if _needs(ctx, 0) else None,
                               F.neg(F.mul(g, F.floor_divide(x, y))) if _needs(ctx, 1) else None),
    scalar_grad=lambda ctx, g, s, rev: (F.neg(F.mul(g, F.floor_divide(s, ctx.inputs[0])))
                                        if rev else g))

fmod, scalar_fmod = binary(
    "fmod", _quiet(np.fmod, int_divisor=True),
    grad=lambda ctx, g, x, y: (g if _needs(ctx, 0) else None,
                               F.neg(F.mul(g, F.trunc(F.div(x, y)))) if _needs(ctx, 1) else None),
    scalar_grad=lambda ctx, g, s, rev: (F.neg(F.mul(g, F.trunc(F.div(s, ctx.inputs[0]))))
                                        if rev else g))


def _complex_pow_grad(ctx, g, x, y):
    """Complex x ** y: g times the conjugate derivatives (a real input gets the real part)."""
    dx = dy = None
    if _needs(ctx, 0):  # y * x^(y-1); 0 where y == 0
        y0 = F.eq(y, 0)
        ys = F.where(y0, 1.0, y)
        dx = F.where(y0, 0.0, F.mul(g, F.conj(F.mul(ys, F.pow(x, F.sub(ys, 1))))))
        dx = dx if x.dtype.is_complex else F.real(dx)
    if _needs(ctx, 1):  # x^y * log(x); 0 where x == 0
        zero = F.eq(x, 0)
        xs = F.where(zero, 1.0, x)
        dy = F.where(zero, 0.0, F.mul(g, F.conj(F.mul(F.pow(xs, y), F.log(xs)))))
        dy = dy if y.dtype.is_complex else F.real(dy)
    return dx, dy


def _pow_grad(ctx, g, x, y):
    # The gradient recomputes x**y instead of saving it, so pow_ may be followed by other
    # in-place ops. Masked places use safe operands (no 0 * inf, no warnings).
    if x.dtype.is_complex or y.dtype.is_complex:
        return _complex_pow_grad(ctx, g, x, y)
    dx = dy = None
    if _needs(ctx, 0):  # y * x^(y-1); 0 where y == 0
        y0 = F.eq(y, 0)
        ys = F.where(y0, 1.0, y)
        dx = F.where(y0, 0.0, F.mul(g, F.mul(ys, F.pow(x, F.sub(ys, 1)))))
    if _needs(ctx, 1):  # x^y * log(x); 0 where x == 0 and y >= 0
        zero = F.logical_and(F.eq(x, 0), F.ge(y, 0))
        xs = F.where(zero, 1.0, x)
        dy = F.where(zero, 0.0, F.mul(g, F.mul(F.pow(xs, y), F.log(xs))))
    return dx, dy


def _scalar_pow_grad(ctx, g, s, rev):
    x = ctx.inputs[0]
    if rev:  # d(s^x)/dx = s^x * log(s); 0 where s == 0 and x >= 0
        with np.errstate(all="ignore"):
            log_s = float(np.log(float(s)))
        if s == 0:
            zero = F.ge(x, 0)
            return F.where(zero, 0.0, F.mul(g, F.mul(F.pow(s, F.where(zero, 1.0, x)), log_s)))
        return F.mul(g, F.mul(F.pow(s, x), log_s))
    if s == 0:
        return F.zeros_like(g)
    d = F.mul(F.pow(x, s - 1), s)
    return F.mul(g, F.conj(d) if d.dtype.is_complex else d)  # PyTorch's conjugate rule


def _power(a, b, out, dtype, casting):
    if out.dtype == np.bool_:  # NumPy has no bool loop: a ** b is false only for False ** True
        np.logical_or(a, np.logical_not(b), out=out)
    elif out.dtype.kind in "iu" and isinstance(b, np.ndarray) and b.dtype.kind == "i":
        _int_power(a, b, out)
    else:
        np.power(a, b, out=out, dtype=dtype, casting=casting)


def _int_power(a, b: np.ndarray, out: np.ndarray) -> None:
    """Integer ``a ** b`` with signed exponents. As in PyTorch, ``x ** -n`` is 1 for x == 1,
    +-1 for x == -1 (by the parity of n) and 0 for any other x, 0 included. NumPy refuses
    negative exponents, raising midway through its loop: it is tried first unless ``out``
    overlaps an input (a partial result would then corrupt the retry)."""
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        if not (b.size and b.min() < 0):
            np.power(a, b, out=out, dtype=out.dtype, casting="unsafe")
            return
    else:
        try:
            np.power(a, b, out=out, dtype=out.dtype, casting="unsafe")
            return
        except ValueError:  # a negative exponent
            pass
    neg = b < 0
    base = np.asarray(a).astype(out.dtype, copy=False)  # the base as the op computes it
    small = np.where(base == 1, 1, np.where(base == -1, np.where(b & 1, -1, 1), 0))
    np.power(a, np.where(neg, 0, b), out=out, dtype=out.dtype, casting="unsafe")
    np.copyto(out, small, casting="unsafe", where=neg)


pow_op, scalar_pow = binary("pow", _quiet(_power), grad=_pow_grad, scalar_grad=_scalar_pow_grad,
                            exact_scalar=True, amp="deny")


def _scalar_pow_infer(inputs, attrs, base=scalar_pow.infer_fn):
    # A negative integral exponent of an integer or bool tensor is an error (PyTorch's rule);
    # a tensor exponent instead gives 1, +-1 or 0 per element (see _int_power). A complex
    # tensor to a real or complex number is supported (a complex base number is not).
    s = attrs["scalar"]
    x = inputs[0]
    if not attrs.get("reverse") and (x.dtype.is_complex or isinstance(s, complex)):
        d = dt.result_type([x.dtype], (), (s,))
        if not d.is_complex:  # a complex exponent of a real tensor: complex result
            d = dt.complex128 if x.dtype is dt.float64 else dt.complex64
        return [Meta(x._shape, d)]
    if (not attrs.get("reverse") and is_int_scalar(s) and s < 0
            and not x.dtype.is_floating_point):
        raise ValueError(f"Integers to negative integer powers are not allowed ({x.dtype} "
                         f"tensor, exponent {s})")
    return base(inputs, attrs)


scalar_pow.infer(_scalar_pow_infer)
pow_op.infer(_binary_infer("pow", "arith", True))  # complex tensors to complex tensor powers


def _minmax_grads(cmp: str):
    """Gradients of maximum (``cmp="gt"``) / minimum (``"lt"``): the larger (smaller) input
    gets the gradient; ties split it evenly, as in PyTorch."""
    def win(a, b):
        return getattr(F, cmp)(a, b)

    def grad(ctx, g, x, y):
        wins, tie = win(x, y), F.eq(x, y)
        half = F.mul(g, 0.5)
        dx = F.where(wins, g, F.where(tie, half, 0.0)) if _needs(ctx, 0) else None
        dy = F.where(wins, 0.0, F.where(tie, half, g)) if _needs(ctx, 1) else None
        return dx, dy

    def scalar_grad(ctx, g, s, rev):
        x = ctx.inputs[0]
        return F.where(win(x, s), g, F.where(F.eq(x, s), F.mul(g, 0.5), 0.0))
    return grad, scalar_grad


maximum, scalar_maximum = binary("maximum", np.maximum, grad=_minmax_grads("gt")[0],
                                 scalar_grad=_minmax_grads("gt")[1])
minimum, scalar_minimum = binary("minimum", np.minimum, grad=_minmax_grads("lt")[0],
                                 scalar_grad=_minmax_grads("lt")[1])
# one element in generated C (ops/registry.py: c_expr): NaN wins, as in np.maximum / minimum
maximum.c_expr = "(({0} >= {1} || {0} != {0}) ? {0} : {1})"
minimum.c_expr = "(({0} <= {1} || {0} != {0}) ? {0} : {1})"
scalar_maximum.c_expr = c_scalar("(({0} >= {scalar} || {0} != {0}) ? {0} : {scalar})")
scalar_minimum.c_expr = c_scalar("(({0} <= {scalar} || {0} != {0}) ? {0} : {scalar})")


def _atan2_grad(ctx, g, y, x):  # atan2(y, x): d/dy = x / r^2, d/dx = -y / r^2
    r2 = F.add(F.mul(x, x), F.mul(y, y))
    return (F.div(F.mul(g, x), r2) if _needs(ctx, 0) else None,
            F.neg(F.div(F.mul(g, y), r2)) if _needs(ctx, 1) else None)


def _scalar_atan2_grad(ctx, g, s, rev):
    t = ctx.inputs[0]
    r2 = F.add(F.mul(t, t), s * s)
    return F.div(F.mul(g, -s), r2) if rev else F.div(F.mul(g, s), r2)


atan2, scalar_atan2 = binary("atan2", np.arctan2, kind="float", grad=_atan2_grad,
                             scalar_grad=_scalar_atan2_grad)

refuse_bool(floor_divide, scalar_floor_divide, remainder, scalar_remainder, fmod, scalar_fmod,
            pow_op)  # (a bool tensor to a bool scalar power stays bool, as in PyTorch)
