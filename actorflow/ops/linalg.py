"""Linear algebra: matmul (batched, broadcasting) and friends."""
from __future__ import annotations

import numpy as np

from actorflow.framework import dtype as dt
from actorflow.ops._common import F, broadcast_shapes, promote
from actorflow.ops.boxing import B, P, S, Sig
from actorflow.ops.registry import Meta, fail, register

matmul = register("matmul", bias_act_epilogue=True, add_to_output=True, amp="allow",
                  doc="a @ b with NumPy's matmul rules (1-d operands, broadcast batch dims); "
                      "attrs transpose_a / transpose_b swap the last two dims of an operand.")


@matmul.infer
def _(inputs, attrs):
    a, b = inputs
    sa, sb = a._shape, b._shape
    if not sa or not sb:
        fail("matmul", "both arguments need at least 1 dimension", sa, sb)
    if attrs.get("transpose_a") and len(sa) >= 2:
        sa = sa[:-2] + (sa[-1], sa[-2])
    if attrs.get("transpose_b") and len(sb) >= 2:
        sb = sb[:-2] + (sb[-1], sb[-2])
    ka = sa[-1]
    kb = sb[-2] if len(sb) >= 2 else sb[0]
    if ka != kb:
        fail("matmul", f"inner dimensions differ ({ka} vs {kb})", a._shape, b._shape)
    if len(sa) == 1 and len(sb) == 1:
        shape = ()
    elif len(sb) == 1:
        shape = sa[:-1]
    elif len(sa) == 1:
        shape = sb[:-2] + (sb[-1],)
    else:
        shape = broadcast_shapes("matmul", sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    d = a.dtype if a.dtype is b.dtype else promote(inputs)
    if d is dt.bool_:  # as PyTorch: no bool matrix products (NumPy's would be an OR of ANDs)
        fail("matmul", "bool tensors are not supported (convert them to an integer or floating "
                       "dtype first)", a._shape, b._shape)
    return [Meta(shape, d)]


@matmul.sbp
def _(inputs, attrs):
    """In OneFlow's order: a batch dim of the result split (on both operands where both have
    it at the same size, else on the one that has it, the other broadcast); then rows of a
    split -> rows of the result split; columns of b split -> columns split; the inner dim split
    on both -> partial sums; a partial operand times a broadcast one -> partial."""
    sa, sb = tuple(inputs[0]._shape), tuple(inputs[1]._shape)
    na, nb = len(sa), len(sb)
    if na < 2 or nb < 2:
        return
    no = max(na, nb)
    for d in range(no - 2):  # batch dims, aligned from the right
        da, db = d - (no - na), d - (no - nb)
        a_n = sa[da] if da >= 0 else 1
        b_n = sb[db] if db >= 0 else 1
        if a_n == b_n and a_n != 1:
            yield Sig((S(da), S(db)), (S(d),))
        elif a_n == 1 and b_n != 1:
            yield Sig((B, S(db)), (S(d),))
        elif b_n == 1 and a_n != 1:
            yield Sig((S(da), B), (S(d),))
    am, ak = (na - 1, na - 2) if attrs.get("transpose_a") else (na - 2, na - 1)
    bk, bn = (nb - 1, nb - 2) if attrs.get("transpose_b") else (nb - 2, nb - 1)
    yield Sig((S(am), B), (S(no - 2),))
    yield Sig((B, S(bn)), (S(no - 1),))
    yield Sig((S(ak), S(bk)), (P,))
    yield Sig((P, B), (P,))
    yield Sig((B, P), (P,))


def _t(x):
    return np.swapaxes(x, -1, -2) if x.ndim >= 2 else x


@matmul.kernel("cpu")
def _(ins, outs, attrs):
    a, b = ins
    if attrs.get("transpose_a"):
        a = _t(a)
    if attrs.get("transpose_b"):
        b = _t(b)
    out = outs[0]
    if a.dtype != out.dtype:
        a = a.astype(out.dtype)
    if b.dtype != out.dtype:
        b = b.astype(out.dtype)
    if out.ndim == 0:
        out[...] = np.dot(a, b)
    else:
        np.matmul(a, b, out=out)


@matmul.grad
def _(ctx, dout):
    a, b = ctx.inputs
    ta, tb = ctx.attrs.get("transpose_a", False), ctx.attrs.get("transpose_b", False)
    if a.ndim == 1 or b.ndim == 1 or ta or tb:
        return _matmul_grad_general(ctx, dout, a, b, ta, tb)
    da = db = None
    if ctx.needs_input_grad[0]:  # complex operands: the conjugate of the partner (PyTorch's)
        da = F.sum_to(F.matmul(dout, F.conj(b), transpose_b=True), a._shape)
    if ctx.needs_input_grad[1]:
        db = F.sum_to(F.matmul(F.conj(a), dout, transpose_a=True), b._shape)
    return da, db


def _matmul_grad_general(ctx, dout, a, b, ta, tb):
    # materialise transposes and 1-d promotions, then use the plain rule
    a2 = F.transpose(a, -1, -2) if ta and a.ndim >= 2 else a
    b2 = F.transpose(b, -1, -2) if tb and b.ndim >= 2 else b
    a_vec, b_vec = a2.ndim == 1, b2.ndim == 1
    if a_vec:
        a2 = F.reshape(a2, (1,) + tuple(a2._shape))
    if b_vec:
        b2 = F.reshape(b2, tuple(b2._shape) + (1,))
    if a_vec and b_vec:  # a dot product: a 0-d gradient
        dout = F.reshape(dout, (1, 1))
    elif a_vec:
        dout = F.unsqueeze(dout, -2)
    elif b_vec:
        dout = F.unsqueeze(dout, -1)
    da = db = None
    if ctx.needs_input_grad[0]:
        da = F.sum_to(F.matmul(dout, F.conj(b2), transpose_b=True), a2._shape)
        da = F.reshape(da, a._shape) if a_vec else da
        if ta and a.ndim >= 2:
            da = F.transpose(da, -1, -2)
    if ctx.needs_input_grad[1]:
        db = F.sum_to(F.matmul(F.conj(a2), dout, transpose_a=True), b2._shape)
        db = F.reshape(db, b._shape) if b_vec else db
        if tb and b.ndim >= 2:
            db = F.transpose(db, -1, -2)
    return da, db
