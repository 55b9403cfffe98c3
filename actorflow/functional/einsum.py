"""``einsum``: Einstein summation over any number of operands, contracted through matmul.

The equation is parsed into one label list per operand (ellipsis dims become labels of their
own, aligned from the right and broadcast like NumPy's). Each operand then takes the diagonal
of every repeated label and sums out the labels nothing else needs; the operands are folded
left to right, two at a time, by permuting each into (batch, free, contracted) order,
reshaping to a batched matrix product and reshaping the product back. A last permute gives
the output order. Every step is a registered op (diagonal, sum, permute, reshape, matmul), so
the gradient runs through the same ops.
"""
from __future__ import annotations

from actorflow.functional.linalg import matmul
from actorflow.functional.reduce import sum as sum_
from actorflow.functional.shape import permute, reshape
from actorflow.functional.views import diagonal
from actorflow.tensor import Tensor

__all__ = ["einsum"]


def _fail(equation: str, message: str, operands=()) -> None:
    shapes = ", ".join(str(tuple(t._shape)) for t in operands)
    extra = f" (operand shapes: {shapes})" if operands else ""
    raise ValueError(f"einsum('{equation}'): {message}{extra}")


def _labels(equation: str, term: str, ndim: int, operands) -> list:
    """The labels of one operand's term: letters, and ``("...", k)`` for the ellipsis dims
    (``k`` counts from the right, so ellipses of different lengths broadcast)."""
    if term.count("...") > 1 or term.replace("...", "").count(".") or \
            not all(c.isalpha() for c in term.replace("...", "")):
        _fail(equation, f"invalid subscripts {term!r}: letters and at most one '...'")
    if "..." not in term:
        if len(term) != ndim:
            _fail(equation, f"subscripts {term!r} name {len(term)} dims of an operand with "
                            f"{ndim}", operands)
        return list(term)
    head, tail = term.split("...")
    n_ell = ndim - len(head) - len(tail)
    if n_ell < 0:
        _fail(equation, f"subscripts {term!r} name more dims than an operand with {ndim} has",
              operands)
    return list(head) + [("...", n_ell - i) for i in range(n_ell)] + list(tail)


def _parse(equation: str, operands) -> tuple:
    """(labels per operand, output labels)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        _fail(equation, f"{len(terms)} operand terms for {len(operands)} operands", operands)
    labels = [_labels(equation, t, len(x._shape), operands) for t, x in zip(terms, operands)]
    n_ell = max((lab[1] for ls in labels for lab in ls if isinstance(lab, tuple)), default=0)
    ell = [("...", k) for k in range(n_ell, 0, -1)]
    if arrow:
        if rhs.count("...") > 1 or rhs.replace("...", "").count(".") or \
                not all(c.isalpha() for c in rhs.replace("...", "")):
            _fail(equation, f"invalid output subscripts {rhs!r}")
        head, _, tail = rhs.partition("...")
        if "..." not in rhs and n_ell:
            # an output without '...' sums the ellipsis dims out (as PyTorch does)
            ell = []
        out = list(head) + ell + list(tail)
        letters = [c for c in out if isinstance(c, str)]
        if len(set(letters)) != len(letters):
            _fail(equation, f"output subscripts {rhs!r} repeat a label")
        seen = {lab for ls in labels for lab in ls}
        for c in letters:
            if c not in seen:
                _fail(equation, f"output label {c!r} appears in no operand")
    else:
        counts: dict = {}
        for ls in labels:
            for lab in ls:
                if isinstance(lab, str):
                    counts[lab] = counts.get(lab, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1)
    return labels, out


def _take_diagonals(x: Tensor, labels: list) -> tuple:
    """``x`` with one dim per distinct label: a repeated label becomes its diagonal."""
    labels = list(labels)
    while True:
        for i, lab in enumerate(labels):
            if lab in labels[i + 1:]:
                j = labels.index(lab, i + 1)
                if x._shape[i] != x._shape[j]:
                    raise ValueError(f"einsum: label {lab!r} is repeated on dims of sizes "
                                     f"{x._shape[i]} and {x._shape[j]} (shape "
                                     f"{tuple(x._shape)})")
                x = diagonal(x, 0, i, j)  # the diagonal dim goes last
                labels = [lb for k, lb in enumerate(labels) if k not in (i, j)] + [lab]
                break
        else:
            return x, labels


def _sum_out(x: Tensor, labels: list, keep) -> tuple:
    """``x`` summed over its labels outside ``keep``."""
    dims = [i for i, lab in enumerate(labels) if lab not in keep]
    if not dims:
        return x, labels
    return sum_(x, tuple(dims)), [lab for lab in labels if lab in keep]


def _prod(sizes) -> int:
    n = 1
    for s in sizes:
        n *= s
    return n


def _contract(a: Tensor, la: list, b: Tensor, lb: list, keep: set) -> tuple:
    """The product of two operands summed over their shared labels outside ``keep``."""
    size_a = dict(zip(la, a._shape))
    size_b = dict(zip(lb, b._shape))
    shared = [lab for lab in la if lab in size_b]
    # a shared label of size 1 on one side only broadcasts: sum the other side over it first
    for lab in shared:
        if lab not in keep and size_a[lab] != size_b[lab]:
            if size_a[lab] == 1:
                b, lb = _sum_out(b, lb, set(lb) - {lab})
                a, la = _sum_out(a, la, set(la) - {lab})
            elif size_b[lab] == 1:
                a, la = _sum_out(a, la, set(la) - {lab})
                b, lb = _sum_out(b, lb, set(lb) - {lab})
    size_a = dict(zip(la, a._shape))
    size_b = dict(zip(lb, b._shape))
    batch = [lab for lab in la if lab in size_b and lab in keep]
    contracted = [lab for lab in la if lab in size_b and lab not in keep]
    left = [lab for lab in la if lab not in size_b]
    right = [lab for lab in lb if lab not in size_a]
    a = permute(a, [la.index(lab) for lab in batch + left + contracted])
    b = permute(b, [lb.index(lab) for lab in batch + contracted + right])
    k = _prod(size_a[lab] for lab in contracted)
    n_left = _prod(size_a[lab] for lab in left)
    n_right = _prod(size_b[lab] for lab in right)
    a = reshape(a, [size_a[lab] for lab in batch] + [n_left, k])
    b = reshape(b, [size_b[lab] for lab in batch] + [k, n_right])
    out = matmul(a, b)
    batch_sizes = list(out._shape[:len(batch)])
    out = reshape(out, batch_sizes + [size_a[lab] for lab in left]
                  + [size_b[lab] for lab in right])
    return out, batch + left + right


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation: ``einsum("bij,bjk->bik", a, b)`` is a batched matmul,
    ``einsum("ii", a)`` a trace, ``einsum("i,j", u, v)`` an outer product (implicit output:
    the labels used once, sorted), ``"...ij->...ji"`` broadcasts the leading dims. Operands
    may also be given as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError(f"einsum('{equation}'): needs at least one operand")
    for t in operands:
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum('{equation}'): operands must be Tensors, got "
                            f"{type(t).__name__}")
    labels, out = _parse(equation, operands)
    ops = []
    for x, ls in zip(operands, labels):
        x, ls = _take_diagonals(x, ls)
        ops.append((x, ls))
    # check that each label has one size (or 1, broadcast) across the operands
    sizes: dict = {}
    for x, ls in ops:
        for lab, s in zip(ls, x._shape):
            if sizes.get(lab, 1) != 1 and s != 1 and sizes[lab] != s:
                name = "..." if isinstance(lab, tuple) else repr(lab)
                _fail(equation, f"label {name} has sizes {sizes[lab]} and {s}", operands)
            if s != 1 or lab not in sizes:
                sizes[lab] = s
    acc, acc_labels = None, None
    for i, (x, ls) in enumerate(ops):
        later = set(out)
        for _, rest in ops[i + 1:]:
            later.update(rest)
        if acc is None:
            acc, acc_labels = _sum_out(x, ls, later)
            continue
        x, ls = _sum_out(x, ls, later | set(acc_labels))
        acc, acc_labels = _sum_out(acc, acc_labels, later | set(ls))
        acc, acc_labels = _contract(acc, acc_labels, x, ls, later)
    acc, acc_labels = _sum_out(acc, acc_labels, set(out))
    result = permute(acc, [acc_labels.index(lab) for lab in out]) if out else acc
    want = tuple(sizes[lab] for lab in out)
    if tuple(result._shape) != want:  # output labels broadcast from size 1
        result = result.expand(*want)
    return result
