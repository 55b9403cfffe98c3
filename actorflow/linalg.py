"""``flow.linalg``: norms and products of vectors and matrices (``torch.linalg`` names).

The functions are defined in ``actorflow.functional.linalg``; this module is the public
namespace (``import actorflow.linalg as LA`` or ``flow.linalg.norm``).
"""
from actorflow.functional.linalg import matmul, matrix_norm, norm, vector_norm
from actorflow.functional.linalg_ops import det, inv
from actorflow.functional.linalg_ops import linalg_cross as cross
from actorflow.functional.linalg_decomp import (
    cholesky, logdet, matrix_power, multi_dot, qr, slogdet, solve, solve_triangular, vecdot,
)
from actorflow.functional.linalg_decomp import linalg_diagonal as diagonal
from actorflow.functional.linalg_spectral import eigh, eigvalsh, pinv, svd, svdvals

__all__ = ["matmul", "matrix_norm", "norm", "vector_norm", "det", "inv", "cross", "diagonal",
           "solve", "solve_triangular", "cholesky", "qr", "slogdet", "logdet", "matrix_power",
           "multi_dot", "vecdot", "eigh", "eigvalsh", "svd", "svdvals", "pinv"]
