"""Matrix solves and decompositions over the last two dims (batched, equal batch dims; the
functional API broadcasts them): ``solve``, ``solve_triangular``, ``cholesky``, ``qr`` and
``slogdet``.

LAPACK through NumPy; float16/bfloat16 inputs compute in float32. Real floating dtypes only
(complex inputs are refused by inference, naming the op). Gradients are written with
functional ops (so they differentiate again), in the forms PyTorch uses:

* solve ``X = A^-1 B``: ``gB = solve(A^T, gX)``, ``gA = -gB X^T``;
* solve_triangular: the same, ``gA`` kept to A's triangle;
* cholesky ``A = L L^T``: ``gA = sym(L^-T phi(L^T gL) L^-1)``, ``phi`` the lower triangle with
  its diagonal halved;
* qr ``A = QR``: for ``m >= n``, ``gA = (gQ + Q copyltu(M)) R^-T`` with ``M = R gR^T - gQ^T Q``;
  for ``m < n`` the leading square block ``X = Q U`` takes ``gQ + Y gV^T`` (``A = [X | Y]``,
  ``R = [U | V]``) and ``gY = Q gV``;
* slogdet: ``d logabsdet = g inv(A)^T``; the sign has no gradient.
"""
from __future__ import annotations

import numpy as np

from actorflow.ops._common import F, HALF_DTYPES
from actorflow.ops.boxing import S, Sig
from actorflow.ops.registry import Meta, fail, register


def _matrix(name: str, x, square: bool = True) -> tuple:
    s = tuple(x._shape)
    if len(s) < 2:
        fail(name, f"expected a (batch of) matrix with at least 2 dims, got shape {s}", s)
    if square and s[-1] != s[-2]:
        fail(name, f"expected a (batch of) square matrix, got shape {s}", s)
    if not x.dtype.is_floating_point:
        fail(name, f"expected a real floating point input, got {x.dtype}", s)
    return s


def _work(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype LAPACK takes (float32 for half precision)."""
    return a.astype(np.float32) if a.dtype in HALF_DTYPES or a.dtype.itemsize < 4 else a


def _singular(name: str, shape, err) -> ValueError:
    return ValueError(f"{name}: the input of shape {tuple(shape)} is singular or not of full "
                      f"rank ({err})")


def _batch_rule(n_out: int):
    """The SBP rule of an op with ``n_out`` outputs that computes each matrix alone: every
    input and output split along one batch dim."""
    def rule(inputs, attrs):
        for d in range(len(inputs[0]._shape) - 2):
            yield Sig((S(d),) * len(inputs), (S(d),) * n_out)
    return rule


def _mT(t):
    return F.transpose(t, -2, -1)


# ---- solve --------------------------------------------------------------------------------------

solve = register("solve", grad_uses_outputs=True, amp="deny",
                 doc="X with A X = B for square A (input 0, (*, n, n)) and B (input 1, "
                     "(*, n, k)) of the same batch dims.")
solve.sbp(_batch_rule(1))


def _check_solve(name: str, a, b) -> None:
    sa = _matrix(name, a)
    sb = _matrix(name, b, square=False)
    if sb[:-2] != sa[:-2] or sb[-2] != sa[-1]:
        fail(name, "B must be (*, n, k) with the batch dims and n of A (*, n, n)", sa, sb)
    if a.dtype is not b.dtype:
        fail(name, f"A and B must have the same dtype, got {a.dtype} and {b.dtype}", sa, sb)


@solve.infer
def _(inputs, attrs):
    a, b = inputs
    _check_solve("solve", a, b)
    return [Meta(tuple(b._shape), b.dtype)]


@solve.kernel("cpu")
def _(ins, outs, attrs):
    a, b = _work(ins[0]), _work(ins[1])
    if outs[0].size == 0:
        return
    try:
        outs[0][...] = np.linalg.solve(a, b)
    except np.linalg.LinAlgError as e:
        raise _singular("linalg.solve", a.shape, e) from None


@solve.grad
def _(ctx, dout):
    a = ctx.inputs[0]
    gb = F.call("solve", _mT(a), dout)
    ga = F.neg(F.matmul(gb, _mT(ctx.outputs[0]))) if ctx.needs_input_grad[0] else None
    return ga, gb


# ---- solve_triangular ---------------------------------------------------------------------------

solve_triangular = register(
    "solve_triangular", grad_uses_outputs=True, amp="deny",
    doc="X with A X = B for triangular A (input 0, (*, n, n); attr upper picks its triangle, "
        "unitriangular takes its diagonal as ones; the other elements are not read) and B "
        "(input 1, (*, n, k)).")
solve_triangular.sbp(_batch_rule(1))


@solve_triangular.infer
def _(inputs, attrs):
    a, b = inputs
    _check_solve("solve_triangular", a, b)
    return [Meta(tuple(b._shape), b.dtype)]


def _triangle(a: np.ndarray, upper: bool, unit: bool) -> np.ndarray:
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        n = a.shape[-1]
        t[..., np.arange(n), np.arange(n)] = 1
    return t


@solve_triangular.kernel("cpu")
def _(ins, outs, attrs):
    a = _triangle(_work(ins[0]), attrs["upper"], attrs["unitriangular"])
    if outs[0].size == 0:
        return
    try:
        outs[0][...] = np.linalg.solve(a, _work(ins[1]))
    except np.linalg.LinAlgError as e:
        raise _singular("linalg.solve_triangular", a.shape, e) from None


@solve_triangular.grad
def _(ctx, dout):
    a = ctx.inputs[0]
    upper, unit = ctx.attrs["upper"], ctx.attrs["unitriangular"]
    gb = F.call("solve_triangular", _mT(a), dout, upper=not upper, unitriangular=unit)
    ga = None
    if ctx.needs_input_grad[0]:
        ga = F.neg(F.matmul(gb, _mT(ctx.outputs[0])))
        off = 1 if unit else 0  # a unit diagonal is not read: no gradient there
        ga = F.triu(ga, off) if upper else F.tril(ga, -off)
    return ga, gb


# ---- cholesky -----------------------------------------------------------------------------------

cholesky = register("cholesky", grad_uses_outputs=True, amp="deny",
                    doc="The lower Cholesky factor L (A = L L^T) of each symmetric positive "
                        "definite matrix in the last two dims (only the lower triangle of A is "
                        "read).")
cholesky.sbp(_batch_rule(1))


@cholesky.infer
def _(inputs, attrs):
    x = inputs[0]
    return [Meta(_matrix("cholesky", x), x.dtype)]


@cholesky.kernel("cpu")
def _(ins, outs, attrs):
    a = _work(ins[0])
    if a.size == 0:
        return
    low = np.tril(a)
    sym = low + np.swapaxes(np.tril(a, -1), -1, -2)  # LAPACK reads the lower triangle
    try:
        outs[0][...] = np.linalg.cholesky(sym)
    except np.linalg.LinAlgError as e:
        raise ValueError(f"linalg.cholesky: the input of shape {a.shape} is not positive "
                         f"definite ({e})") from None


def _phi(m):
    """The lower triangle of ``m`` with its diagonal halved."""
    return F.sub(F.tril(m), F.mul(F.triu(F.tril(m)), 0.5))


@cholesky.grad
def _(ctx, dout):
    low = ctx.outputs[0]
    phi = _phi(F.matmul(_mT(low), dout))
    # L^-T phi L^-1 as two triangular solves
    left = F.call("solve_triangular", _mT(low), phi, upper=True, unitriangular=False)
    ga = _mT(F.call("solve_triangular", _mT(low), _mT(left), upper=True, unitriangular=False))
    return F.mul(F.add(ga, _mT(ga)), 0.5)


# ---- qr -----------------------------------------------------------------------------------------

QR_MODES = ("reduced", "complete", "r")

qr = register("qr", grad_uses_outputs=True, amp="deny",
              doc="Q, R with A = QR, Q orthonormal columns and R upper triangular, of each "
                  "(m, n) matrix in the last two dims; attr mode: 'reduced' (Q (m, k), R (k, n), "
                  "k = min(m, n)), 'complete' (Q (m, m), R (m, n)) or 'r' (Q empty).")


qr.sbp(_batch_rule(2))

@qr.infer
def _(inputs, attrs):
    x = inputs[0]
    s = _matrix("qr", x, square=False)
    mode = attrs["mode"]
    if mode not in QR_MODES:
        fail("qr", f"mode must be one of {QR_MODES}, got {mode!r}", s)
    m, n = s[-2:]
    k = min(m, n)
    batch = s[:-2]
    if mode == "reduced":
        return [Meta(batch + (m, k), x.dtype), Meta(batch + (k, n), x.dtype)]
    if mode == "complete":
        return [Meta(batch + (m, m), x.dtype), Meta(batch + (m, n), x.dtype)]
    return [Meta((0,), x.dtype), Meta(batch + (k, n), x.dtype)]


@qr.kernel("cpu")
def _(ins, outs, attrs):
    a = _work(ins[0])
    if a.size == 0:
        outs[0][...] = np.eye(*outs[0].shape[-2:]) if outs[0].size else 0
        return
    mode = attrs["mode"]
    if mode == "r":
        outs[1][...] = np.linalg.qr(a, mode="r")
        return
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    outs[0][...] = q
    outs[1][...] = r


def _copyltu(m):
    """``m``'s lower triangle mirrored onto the upper one (a symmetric matrix)."""
    return F.add(F.tril(m), _mT(F.tril(m, -1)))


def _qr_grad_tall(q, r, gq, gr):
    """The gradient of A = QR for m >= n (square R), in functional ops."""
    m = F.zeros_like(r) if gr is None else F.matmul(r, _mT(gr))
    if gq is not None:
        m = F.sub(m, F.matmul(_mT(gq), q))
    b = F.matmul(q, _copyltu(m))
    if gq is not None:
        b = F.add(b, gq)
    # b R^-T as a triangular solve: (R^-1 b^T)^T
    return _mT(F.call("solve_triangular", r, _mT(b), upper=True, unitriangular=False))


@qr.grad
def _(ctx, gq, gr):
    mode = ctx.attrs["mode"]
    if mode == "r":
        raise RuntimeError("linalg.qr: the derivative depends on Q, which mode='r' does not "
                           "compute; use mode='reduced'")
    q, r = ctx.outputs
    m, n = ctx.input_metas[0][0][-2:]
    if mode == "complete" and m > n:
        raise RuntimeError("linalg.qr: the decomposition is not differentiable when "
                           "mode='complete' and the matrix has more rows than columns "
                           f"(shape {tuple(ctx.input_metas[0][0])})")
    if m >= n:
        return _qr_grad_tall(q, r, gq, gr)
    # m < n: A = [X | Y], R = [U | V], X = Q U square
    x_cols = ctx.inputs[0]
    u = F.narrow(r, -1, 0, m)
    y = F.narrow(x_cols, -1, m, n - m)
    gu = None if gr is None else F.narrow(gr, -1, 0, m)
    gv = None if gr is None else F.narrow(gr, -1, m, n - m)
    gq2 = gq
    if gv is not None:
        yv = F.matmul(y, _mT(gv))
        gq2 = yv if gq2 is None else F.add(gq2, yv)
    gx = _qr_grad_tall(q, u, gq2, gu)
    gy = F.zeros_like(y) if gv is None else F.matmul(q, gv)
    return F.cat([gx, gy], -1)


# ---- slogdet ------------------------------------------------------------------------------------

slogdet = register("slogdet", amp="deny",
                   doc="sign and log |det| of each square matrix in the last two dims (two "
                       "outputs of the batch shape; a singular matrix: sign 0, -inf).")


slogdet.sbp(_batch_rule(2))

@slogdet.infer
def _(inputs, attrs):
    x = inputs[0]
    s = _matrix("slogdet", x)
    return [Meta(s[:-2], x.dtype), Meta(s[:-2], x.dtype)]


@slogdet.kernel("cpu")
def _(ins, outs, attrs):
    sign, logabs = np.linalg.slogdet(_work(ins[0]))
    outs[0][...] = sign
    outs[1][...] = logabs


@slogdet.grad
def _(ctx, gsign, glog):
    if glog is None:
        return None
    a = ctx.inputs[0]
    scale = F.unsqueeze(F.unsqueeze(glog, -1), -1)
    return F.mul(scale, _mT(F.inv(a)))

