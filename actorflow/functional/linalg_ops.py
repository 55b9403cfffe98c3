"""Matrix products and small linear-algebra functions (torch / OneFlow names): mm, mv, dot,
vdot, inner, outer, addmm, baddbmm, tensordot, cross, det, inv.

The products are composites of ``matmul`` (their gradients are matmul's); ``det`` and ``inv``
are ops (``ops/linalg_dense.py``).
"""
from __future__ import annotations

from actorflow.dispatch import apply
from actorflow.functional.linalg import matmul
from actorflow.functional.shape import permute, reshape
from actorflow.functional.special import conj
from actorflow.ops import registry
from actorflow.tensor import Tensor, register_tensor_methods

_DET = registry.get("det")
_INV = registry.get("inv")


def _dims_of(name: str, t, want: int) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
    if len(t._shape) != want:
        raise ValueError(f"{name}: expected a {want}-d tensor, got shape {tuple(t._shape)}")


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Product of two 2-d matrices."""
    _dims_of("mm", input, 2)
    _dims_of("mm", mat2, 2)
    if input._shape[1] != mat2._shape[0]:
        raise ValueError(f"mm: shapes {tuple(input._shape)} and {tuple(mat2._shape)} cannot be "
                         f"multiplied")
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Product of a 2-d matrix and a 1-d vector."""
    _dims_of("mv", input, 2)
    _dims_of("mv", vec, 1)
    if input._shape[1] != vec._shape[0]:
        raise ValueError(f"mv: shapes {tuple(input._shape)} and {tuple(vec._shape)} cannot be "
                         f"multiplied")
    return matmul(input, vec)


def _vectors(name: str, a, b) -> None:
    _dims_of(name, a, 1)
    _dims_of(name, b, 1)
    if a._shape[0] != b._shape[0]:
        raise RuntimeError(f"{name}: inconsistent tensor size, expected tensor [{a._shape[0]}] "
                           f"and src [{b._shape[0]}] to have the same number of elements")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{name}: expected both vectors to have the same dtype, but found "
                           f"{a.dtype} and {b.dtype}")


def dot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-d tensors of one dtype and length (no conjugation)."""
    _vectors("dot", input, other)
    return matmul(input, other)


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-d tensors, ``input`` conjugated first when complex."""
    _vectors("vdot", input, other)
    return matmul(conj(input), other)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum of products over the last dims of ``input`` and ``other`` (a scalar operand
    multiplies); the result has the shape ``input.shape[:-1] + other.shape[:-1]``."""
    if len(input._shape) == 0 or len(other._shape) == 0:
        return input * other
    if input._shape[-1] != other._shape[-1]:
        raise RuntimeError(f"inner: the last dims of shapes {tuple(input._shape)} and "
                           f"{tuple(other._shape)} differ")
    return tensordot(input, other, ([len(input._shape) - 1], [len(other._shape) - 1]))


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """The outer product of two 1-d tensors: ``out[i, j] = input[i] * vec2[j]``."""
    _dims_of("outer", input, 1)
    _dims_of("outer", vec2, 1)
    return reshape(input, (input._shape[0], 1)) * reshape(vec2, (1, vec2._shape[0]))


ger = outer


def _scaled_sum(name: str, input: Tensor, product: Tensor, beta, alpha) -> Tensor:
    """``beta * input + alpha * product``; with beta = 0 ``input`` is ignored (nan too)."""
    from actorflow.functional.elementwise import broadcast_to

    out = product if alpha == 1 else product * alpha
    if beta == 0:
        shape = tuple(product._shape)
        try:
            broadcast_to(input, shape)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{name}: input of shape {tuple(input._shape)} does not broadcast "
                             f"to the product's shape {shape}") from e
        return out
    return out + (input if beta == 1 else input * beta)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, alpha=1, beta=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` for 2-d ``mat1``, ``mat2`` (OneFlow's
    positional order: alpha, then beta)."""
    _dims_of("addmm", mat1, 2)
    _dims_of("addmm", mat2, 2)
    return _scaled_sum("addmm", input, mm(mat1, mat2), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)`` for 3-d batches."""
    from actorflow.functional.nn_ops import bmm

    return _scaled_sum("baddbmm", input, bmm(batch1, batch2), beta, alpha)


def _axes(name: str, dims, a: Tensor, b: Tensor) -> tuple:
    if isinstance(dims, Tensor):
        vals = dims.tolist()
        dims = vals if isinstance(vals, list) and len(vals) != 1 else (
            vals[0] if isinstance(vals, list) else vals)
    if isinstance(dims, int):
        if dims < 0 or dims > min(len(a._shape), len(b._shape)):
            raise ValueError(f"{name}: dims={dims} is out of range for shapes "
                             f"{tuple(a._shape)} and {tuple(b._shape)}")
        na = len(a._shape)
        return list(range(na - dims, na)), list(range(dims))
    if len(dims) != 2:
        raise ValueError(f"{name}: dims must be an int or two lists of dims, got {dims}")
    da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise ValueError(f"{name}: both lists of dims must have the same length, got {dims}")
    da = [d % len(a._shape) for d in da]
    db = [d % len(b._shape) for d in db]
    return da, db


def tensordot(a: Tensor, b: Tensor, dims=2, out=None) -> Tensor:
    """Sum of products over ``dims`` of ``a`` and ``b`` (an int: the last/first ``dims``
    dims; or two lists of dims); the result has a's free dims then b's."""
    from actorflow.functional.elementwise import expand

    da, db = _axes("tensordot", dims, a, b)
    sa, sb = list(a._shape), list(b._shape)
    for i, j in zip(da, db):
        if sa[i] != sb[j]:
            if 1 not in (sa[i], sb[j]):
                raise ValueError(f"tensordot: contracted dims differ in size: dim {i} of "
                                 f"{tuple(a._shape)} and dim {j} of {tuple(b._shape)}")
            sa[i] = sb[j] = max(sa[i], sb[j])  # a dim of size 1 broadcasts
    if sa != list(a._shape):
        a = expand(a, tuple(sa))
    if sb != list(b._shape):
        b = expand(b, tuple(sb))
    free_a = [i for i in range(len(a._shape)) if i not in da]
    free_b = [j for j in range(len(b._shape)) if j not in db]
    k = 1
    for i in da:
        k *= a._shape[i]
    fa = [a._shape[i] for i in free_a]
    fb = [b._shape[j] for j in free_b]
    m = 1
    for s in fa:
        m *= s
    n = 1
    for s in fb:
        n *= s
    am = reshape(permute(a, tuple(free_a + da)), (m, k))
    bm = reshape(permute(b, tuple(db + free_b)), (k, n))
    return reshape(matmul(am, bm), tuple(fa + fb))


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (None: the first dim of size 3)."""
    from actorflow.functional.elementwise import broadcast_to
    from actorflow.functional.shape import narrow, cat

    try:
        shape = _broadcast_shape(tuple(input._shape), tuple(other._shape))
    except ValueError:
        raise ValueError(f"cross: shapes {tuple(input._shape)} and {tuple(other._shape)} do "
                         f"not broadcast") from None
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ValueError(f"cross: no dim of size 3 in shape {shape}")
    d = dim % len(shape) if shape else 0
    if not shape or shape[d] != 3:
        raise ValueError(f"cross: dim {dim} of shape {shape} must have size 3")
    a, b = broadcast_to(input, shape), broadcast_to(other, shape)
    a0, a1, a2 = (narrow(a, d, i, 1) for i in range(3))
    b0, b1, b2 = (narrow(b, d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=d)


def linalg_cross(input: Tensor, other: Tensor, dim: int = -1) -> Tensor:
    """``torch.linalg.cross``: the cross product along ``dim`` (default the last)."""
    return cross(input, other, dim)


def _broadcast_shape(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError("shapes do not broadcast")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(out)


def det(input: Tensor) -> Tensor:
    """Determinant of each square matrix in the last two dims."""
    return apply(_DET, [input], {})[0]


def inv(input: Tensor) -> Tensor:
    """Inverse of each square matrix in the last two dims."""
    return apply(_INV, [input], {})[0]


inverse = inv


def _addmm_method(self, mat1, mat2, alpha=1, beta=1):
    return addmm(self, mat1, mat2, alpha=alpha, beta=beta)


def _baddbmm_method(self, batch1, batch2, *, beta=1, alpha=1):
    return baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)


register_tensor_methods({"mm": mm, "mv": mv, "dot": dot, "vdot": vdot, "inner": inner,
                         "outer": outer, "ger": outer, "addmm": _addmm_method,
                         "baddbmm": _baddbmm_method, "tensordot": tensordot, "cross": cross,
                         "det": det, "inverse": inv})

__all__ = ["mm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "baddbmm", "tensordot",
           "cross", "det", "inv", "inverse"]
