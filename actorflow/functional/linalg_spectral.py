"""Spectral decompositions and what is built on them (``torch.linalg`` semantics): eigh,
eigvalsh, svd, svdvals and pinv. The ops are in ``ops/linalg_spectral.py``."""
from __future__ import annotations

import numpy as np

from actorflow.dispatch import apply
from actorflow.functional.linalg import matmul
from actorflow.ops import registry
from actorflow.tensor import Tensor

_EIGH = registry.get("eigh")
_SVD = registry.get("svd")


def _need_matrix(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
    if t.dim() < 2:
        raise ValueError(f"{name}: expected a (batch of) matrix of at least 2 dims, got shape "
                         f"{tuple(t.shape)}")


def eigh(A: Tensor, UPLO: str = "L") -> tuple:
    """(eigenvalues ascending, eigenvectors as columns) of symmetric ``A`` (*, n, n); only its
    ``UPLO`` ('L' lower, 'U' upper) triangle is read."""
    _need_matrix("linalg.eigh", A)
    return tuple(apply(_EIGH, [A], {"UPLO": str(UPLO).upper()}))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of symmetric ``A``; see ``eigh``."""
    return eigh(A, UPLO)[0]


def svd(A: Tensor, full_matrices: bool = True) -> tuple:
    """(U, S, Vh) with ``A = U diag(S) Vh``, S descending; ``full_matrices=False``: U (*, m, k)
    and Vh (*, k, n), k = min(m, n) (the form with gradients through U and Vh)."""
    _need_matrix("linalg.svd", A)
    return tuple(apply(_SVD, [A], {"full_matrices": bool(full_matrices), "compute_uv": True}))


def svdvals(A: Tensor) -> Tensor:
    """The singular values of ``A``, descending (differentiable: computed with U and Vh)."""
    _need_matrix("linalg.svdvals", A)
    return apply(_SVD, [A], {"full_matrices": False, "compute_uv": True})[1]


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse of ``A`` (*, m, n): ``V diag(1/S) U^T`` over the
    singular values above ``max(atol, rtol * S_max)`` (rtol defaults to ``eps * max(m, n)``
    when atol is not given, else 0). ``hermitian=True`` uses ``eigh`` (A symmetric)."""
    _need_matrix("linalg.pinv", A)
    m, n = A.shape[-2:]
    if hermitian:
        lam, v = eigh(A)
        u, s, vh = v, lam.abs(), v.transpose(-2, -1)
    else:
        u, s, vh = svd(A, full_matrices=False)
    if rtol is None:
        given = atol is not None and (isinstance(atol, Tensor) or float(atol) > 0)
        rtol = 0.0 if given else float(np.finfo(A.dtype.np).eps) * max(m, n)
    tol = s.amax(dim=-1, keepdim=True) * float(rtol) if s.numel() else s
    if isinstance(atol, Tensor):
        tol = tol.maximum(atol.unsqueeze(-1) if atol.dim() else atol)
    elif atol is not None:
        tol = tol.clamp(min=float(atol))
    keep = (s > tol).to(s.dtype)
    inv_s = keep / (s * keep + (1.0 - keep))  # dropped values: 0, with no division by zero
    if hermitian:
        inv_s = inv_s * lam.sign()
    return matmul(vh.transpose(-2, -1) * inv_s.unsqueeze(-2), u.transpose(-2, -1))


__all__ = ["eigh", "eigvalsh", "svd", "svdvals", "pinv"]
