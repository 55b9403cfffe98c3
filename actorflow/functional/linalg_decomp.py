"""Solves and decompositions (``torch.linalg`` semantics): solve, solve_triangular, cholesky,
qr, slogdet / logdet, and the compositions linalg users reach for: diagonal, matrix_power,
multi_dot, vecdot.

The ops are in ``ops/linalg_decomp.py`` and take equal batch dims; the functions here
broadcast the batch dims (through ``expand``, whose gradient sums back), turn a right-hand
vector into a one-column matrix and a right-side solve (``left=False``) into a transposed one.
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.activation import log
from actorflow.functional.creation import eye
from actorflow.functional.elementwise import expand
from actorflow.functional.linalg import matmul
from actorflow.functional.linalg_ops import inv
from actorflow.functional.shape import squeeze, unsqueeze
from actorflow.functional.special import conj
from actorflow.functional.views import diagonal as _diagonal
from actorflow.ops import registry
from actorflow.ops._common import broadcast_shapes
from actorflow.tensor import Tensor, register_tensor_methods

_SOLVE = registry.get("solve")
_SOLVE_TRIANGULAR = registry.get("solve_triangular")
_CHOLESKY = registry.get("cholesky")
_QR = registry.get("qr")
_SLOGDET = registry.get("slogdet")


def _mT(t: Tensor) -> Tensor:
    return t.transpose(-2, -1)


def _need_matrix(name: str, t, square: bool = True) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
    s = tuple(t._shape)
    if len(s) < 2 or (square and s[-1] != s[-2]):
        what = "square matrix" if square else "matrix"
        raise ValueError(f"{name}: A must be a (batch of) {what} of at least 2 dims, got "
                         f"shape {s}")


def _solve_with(op, name: str, a: Tensor, b: Tensor, attrs: dict) -> Tensor:
    """Solve ``a x = b`` with ``op``: a vector ``b`` (PyTorch's rule: 1-d, or a's batch
    shape + (n,)) becomes one column; batch dims broadcast."""
    _need_matrix(name, a)
    if not isinstance(b, Tensor):
        raise TypeError(f"{name}: expected B to be a Tensor, got {type(b).__name__}")
    sa, sb = tuple(a._shape), tuple(b._shape)
    vector = len(sb) == 1 or (len(sb) == len(sa) - 1 and sb == sa[:-1])
    if vector:
        b = unsqueeze(b, -1)
    sb = tuple(b._shape)
    if len(sb) < 2 or sb[-2] != sa[-1]:
        raise ValueError(f"{name}: incompatible shapes of A {sa} and B {tuple(b._shape)}: B "
                         f"needs {sa[-1]} rows")
    batch = broadcast_shapes(name, sa[:-2], sb[:-2])
    if tuple(sa[:-2]) != batch:
        a = expand(a, batch + sa[-2:])
    if tuple(sb[:-2]) != batch:
        b = expand(b, batch + sb[-2:])
    x = apply(op, [a, b], attrs)[0]
    return squeeze(x, -1) if vector else x


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``) for square ``A`` (*, n, n) and ``B``
    (*, n, k) or a vector (*, n); batch dims broadcast."""
    if left:
        return _solve_with(_SOLVE, "linalg.solve", A, B, {})
    _need_matrix("linalg.solve", A)
    return _mT(_solve_with(_SOLVE, "linalg.solve", _mT(A), _mT(B), {}))


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """X with ``A X = B`` (``left=False``: ``X A = B``) for triangular ``A``: its upper
    (``upper=True``) or lower triangle is read, its diagonal taken as ones when
    ``unitriangular``; ``B`` is (*, n, k), batch dims broadcast."""
    _need_matrix("linalg.solve_triangular", A)
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise ValueError("linalg.solve_triangular: B must be a (batch of) matrix of at least 2 "
                         f"dims, got {getattr(B, 'shape', B)!r}")
    attrs = {"upper": bool(upper), "unitriangular": bool(unitriangular)}
    if left:
        return _solve_with(_SOLVE_TRIANGULAR, "linalg.solve_triangular", A, B, attrs)
    attrs["upper"] = not upper  # X A = B  <=>  A^T X^T = B^T, A^T's triangle is the other one
    return _mT(_solve_with(_SOLVE_TRIANGULAR, "linalg.solve_triangular", _mT(A), _mT(B),
                           attrs))


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor of each symmetric positive definite matrix: lower ``L`` with
    ``A = L L^T`` (``upper=True``: ``U = L^T``, ``A = U^T U``). Only A's lower triangle is
    read."""
    _need_matrix("linalg.cholesky", A)
    low = apply(_CHOLESKY, [A], {})[0]
    return _mT(low) if upper else low


def qr(A: Tensor, mode: str = "reduced") -> tuple:
    """``(Q, R)`` with ``A = Q R`` for each (m, n) matrix: ``mode`` 'reduced' (Q (m, k),
    R (k, n), k = min(m, n)), 'complete' (Q (m, m)) or 'r' (R only; Q is empty)."""
    _need_matrix("linalg.qr", A, square=False)
    q, r = apply(_QR, [A], {"mode": mode})
    return q, r


def slogdet(A: Tensor) -> tuple:
    """``(sign, logabsdet)`` of each square matrix: ``det = sign * exp(logabsdet)``, computed
    without overflow (a singular matrix gives sign 0 and -inf)."""
    _need_matrix("linalg.slogdet", A)
    sign, logabs = apply(_SLOGDET, [A], {})
    return sign, logabs


def logdet(A: Tensor) -> Tensor:
    """``log(det(A))``: nan where the determinant is negative, -inf where it is 0."""
    sign, logabs = slogdet(A)
    return logabs + log(sign)


def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``flow.diagonal`` with the defaults of a batch of matrices (the last two dims)."""
    return _diagonal(A, offset, dim1, dim2)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (repeated squaring); ``n = 0`` the identity,
    ``n < 0`` powers of the inverse."""
    _need_matrix("linalg.matrix_power", A)
    if not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        k = A._shape[-1]
        return expand(eye(k, dtype=A.dtype), tuple(A._shape)).clone()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def multi_dot(tensors) -> Tensor:
    """The product of a list of matrices (the first may be a vector (n,), the last (n,)),
    multiplied in the order of fewest scalar multiplications."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = unsqueeze(ts[0], 0)
    if last_vec:
        ts[-1] = unsqueeze(ts[-1], -1)
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise ValueError(f"linalg.multi_dot: tensor {i} must be 2-d (the first and last "
                             f"may be 1-d), got shape {tuple(t._shape)}")
    dims = [ts[0]._shape[0]] + [t._shape[1] for t in ts]
    for i in range(len(ts) - 1):
        if ts[i]._shape[1] != ts[i + 1]._shape[0]:
            raise ValueError(f"linalg.multi_dot: tensors {i} and {i + 1} cannot be multiplied "
                             f"(shapes {tuple(ts[i]._shape)} and {tuple(ts[i + 1]._shape)})")
    out = _chain(ts, _chain_order(dims), 0, len(ts) - 1)
    if first_vec:
        out = squeeze(out, 0)
    if last_vec:
        out = squeeze(out, -1)
    return out


def _chain_order(dims: list) -> list:
    """The split table of the matrix-chain order (dynamic programming)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(ts: list, split: list, i: int, j: int) -> Tensor:
    if i == j:
        return ts[i]
    k = split[i][j]
    return matmul(_chain(ts, split, i, k), _chain(ts, split, k + 1, j))


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along ``dim`` (``x`` conjugated when complex), batch dims
    broadcasting."""
    return (conj(x) * y).sum(dim)


def _cholesky_method(self: Tensor, upper: bool = False) -> Tensor:
    return cholesky(self, upper=upper)


register_tensor_methods({"slogdet": slogdet, "logdet": logdet, "cholesky": _cholesky_method,
                         "matrix_power": matrix_power})

linalg_solve = solve
linalg_solve_triangular = solve_triangular
linalg_cholesky = cholesky
linalg_qr = qr

__all__ = ["slogdet", "logdet", "matrix_power", "linalg_solve", "linalg_solve_triangular",
           "linalg_cholesky", "linalg_qr", "linalg_diagonal"]
