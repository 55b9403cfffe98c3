"""Spectral decompositions over the last two dims (batched): ``eigh`` (symmetric
eigendecomposition) and ``svd`` (singular value decomposition).

LAPACK through NumPy; float16/bfloat16 inputs compute in float32; real floating dtypes only.
Gradients are written with functional ops, in the forms PyTorch uses (real case):

* eigh ``A = V diag(L) V^T``: ``gA = V (diag(gL) + sym(V^T gV) / E) V^T`` with
  ``E_ij = L_j - L_i`` off the diagonal (``sym(X) = (X - X^T) / 2``);
* svd ``A = U diag(S) Vh`` (reduced): with ``E_ij = S_j^2 - S_i^2``,
  ``K = (skew(U^T gU) S_j + S_i skew(Vh gV)) / E + diag(gS)`` (``skew(X) = X - X^T``), then
  ``gA = U K Vh`` plus, for tall ``A``, ``(I - U U^T) gU S^-1 Vh`` and, for wide ``A``,
  ``U S^-1 gV^T (I - V V^T)``.

Both are undefined where eigen/singular values repeat (E has zeros); as in PyTorch, the result
is then not finite.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F
from actorflow.ops.linalg_decomp import _batch_rule, _matrix, _mT, _work
from actorflow.ops.registry import Meta, fail, register

# ---- eigh ---------------------------------------------------------------------------------------

eigh = register("eigh", grad_uses_outputs=True, amp="deny",
                doc="Eigenvalues (ascending, (*, n)) and orthonormal eigenvectors (columns, "
                    "(*, n, n)) of each symmetric matrix in the last two dims; attr UPLO: 'L' "
                    "reads the lower triangle, 'U' the upper.")
eigh.sbp(_batch_rule(2))


@eigh.infer
def _(inputs, attrs):
    x = inputs[0]
    s = _matrix("linalg.eigh", x)
    if attrs["UPLO"] not in ("L", "U"):
        fail("linalg.eigh", f"UPLO must be 'L' or 'U', got {attrs['UPLO']!r}", s)
    return [Meta(s[:-1], x.dtype), Meta(s, x.dtype)]


@eigh.kernel("cpu")
def _(ins, outs, attrs):
    a = _work(ins[0])
    if a.size == 0:
        return
    try:
        w, v = np.linalg.eigh(a, UPLO=attrs["UPLO"])
    except np.linalg.LinAlgError as e:
        raise ValueError(f"linalg.eigh: no convergence for the input of shape {a.shape} "
                         f"({e})") from None
    outs[0][...] = w
    outs[1][...] = v


def _off_diagonal_ratio(num, den, n: int, dtype):
    """``num / den`` off the diagonal, 0 on it (den's diagonal is made 1 first)."""
    eye = F.eye(n, dtype=dtype)
    return F.mul(F.div(num, F.add(den, eye)), F.sub(F.ones_like(eye), eye))


@eigh.grad
def _(ctx, gl, gv):
    lam, v = ctx.outputs
    n = lam.shape[-1]
    if gv is None:
        k = None
    else:
        vg = F.matmul(_mT(v), gv)
        sym = F.mul(F.sub(vg, _mT(vg)), 0.5)
        e = F.sub(F.unsqueeze(lam, -2), F.unsqueeze(lam, -1))
        k = _off_diagonal_ratio(sym, e, n, lam.dtype)
    if gl is not None:
        d = F.mul(F.unsqueeze(gl, -1), F.eye(n, dtype=lam.dtype))
        k = d if k is None else F.add(k, d)
    if k is None:
        return F.zeros_like(ctx.inputs[0])
    return F.matmul(F.matmul(v, k), _mT(v))


# ---- svd ----------------------------------------------------------------------------------------

svd = register("svd", grad_uses_outputs=True, amp="deny",
               doc="U, S (descending), Vh with A = U diag(S) Vh for each (m, n) matrix in the "
                   "last two dims; attr full_matrices: U (m, m) and Vh (n, n), else U (m, k) "
                   "and Vh (k, n), k = min(m, n); attr compute_uv=False leaves U and Vh "
                   "empty.")
svd.sbp(_batch_rule(3))


@svd.infer
def _(inputs, attrs):
    x = inputs[0]
    s = _matrix("linalg.svd", x, square=False)
    m, n = s[-2:]
    k = min(m, n)
    b = s[:-2]
    if not attrs["compute_uv"]:
        return [Meta((0,), x.dtype), Meta(b + (k,), x.dtype), Meta((0,), x.dtype)]
    if attrs["full_matrices"]:
        return [Meta(b + (m, m), x.dtype), Meta(b + (k,), x.dtype), Meta(b + (n, n), x.dtype)]
    return [Meta(b + (m, k), x.dtype), Meta(b + (k,), x.dtype), Meta(b + (k, n), x.dtype)]


@svd.kernel("cpu")
def _(ins, outs, attrs):
    a = _work(ins[0])
    if a.size == 0:
        for o in (outs[0], outs[2]):  # identities for the empty dims
            if o.size:
                o[...] = np.eye(*o.shape[-2:])
        return
    try:
        if not attrs["compute_uv"]:
            outs[1][...] = np.linalg.svd(a, compute_uv=False)
            return
        u, s, vh = np.linalg.svd(a, full_matrices=attrs["full_matrices"])
    except np.linalg.LinAlgError as e:
        raise ValueError(f"linalg.svd: no convergence for the input of shape {a.shape} "
                         f"({e})") from None
    outs[0][...] = u
    outs[1][...] = s
    outs[2][...] = vh


@svd.grad
def _(ctx, gu, gs, gvh):
    if not ctx.attrs["compute_uv"]:
        raise RuntimeError("linalg.svd: the derivative needs U and Vh, which compute_uv=False "
                           "does not compute; use linalg.svd(A, full_matrices=False)")
    u, s, vh = ctx.outputs
    m, n = ctx.input_metas[0][0][-2:]
    k = min(m, n)
    if ctx.attrs["full_matrices"] and (gu is not None or gvh is not None) and m != n:
        raise RuntimeError("linalg.svd: the derivative through U or Vh with full_matrices=True "
                           "is not defined; use full_matrices=False")
    if gu is None and gvh is None:
        if gs is None:
            return F.zeros_like(ctx.inputs[0])
        return F.matmul(F.mul(u, F.unsqueeze(gs, -2)), vh)
    v = _mT(vh)
    gu_ = F.zeros_like(u) if gu is None else gu
    gv = F.zeros_like(v) if gvh is None else _mT(gvh)
    ug = F.matmul(_mT(u), gu_)
    vg = F.matmul(vh, gv)
    s_row, s_col = F.unsqueeze(s, -2), F.unsqueeze(s, -1)
    num = F.add(F.mul(F.sub(ug, _mT(ug)), s_row), F.mul(s_col, F.sub(vg, _mT(vg))))
    s2 = F.mul(s, s)
    kmat = _off_diagonal_ratio(num, F.sub(F.unsqueeze(s2, -2), F.unsqueeze(s2, -1)), k,
                               s.dtype)
    if gs is not None:
        kmat = F.add(kmat, F.mul(F.unsqueeze(gs, -1), F.eye(k, dtype=s.dtype)))
    if m > k:
        gus = F.div(gu_, s_row)
        left = F.add(F.matmul(u, kmat), F.sub(gus, F.matmul(u, F.matmul(_mT(u), gus))))
        return F.matmul(left, vh)
    if n > k:
        gvs = F.div(gv, s_row)
        right = F.add(F.matmul(kmat, vh), F.sub(_mT(gvs), F.matmul(F.matmul(_mT(gvs), v), vh)))
        return F.matmul(u, right)
    return F.matmul(F.matmul(u, kmat), vh)
