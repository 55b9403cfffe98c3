"""``flow.linalg``: norms and products of vectors and matrices (``torch.linalg`` names).

The functions are defined in ``actorflow.functional.linalg``; this module is the public
namespace (``import actorflow.linalg as LA`` or ``flow.linalg.norm``).
"""
from actorflow.functional.linalg import matmul, matrix_norm, norm, vector_norm

__all__ = ["matmul", "matrix_norm", "norm", "vector_norm"]
