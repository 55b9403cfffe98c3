"""``flow.linalg``: norms and products of vectors and matrices (``torch.linalg`` names).

The functions are defined in ``actorflow.functional.linalg``; this module is the public
namespace (``import actorflow.linalg as LA`` or ``flow.linalg.norm``).
"""
from actorflow.functional.linalg import matmul, matrix_norm, norm, vector_norm
from actorflow.functional.linalg_ops import det, inv
from actorflow.functional.linalg_ops import linalg_cross as cross

__all__ = ["matmul", "matrix_norm", "norm", "vector_norm", "det", "inv", "cross"]
