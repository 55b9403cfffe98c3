"""Where a row kernel finds row ``r`` of an input that is a strided view (``rows.py`` runs the
kernel, ``row_source.py`` emits it).

Each array of a row kernel's call reaches the C as four int64 numbers (``ROW_WORDS``), in
elements::

    outer, inner, count, sub

Row ``r`` starts at ``(r / count) * outer + (r % count) * inner``: the leading dims of the
array (those before its row) collapsed into at most two groups, so a head view of attention,
(batch, heads, T, E) taken as a transpose of (batch, T, heads, E), needs no copy. An array
whose rows follow each other by one stride has ``count == 1`` (``inner`` unused). ``sub`` is
the stride between the row's sub-rows (its trailing dims but the last, collapsed into one
index; the last dim unit-stride) for an input the kernel may gather (``RowTask.gather``: it
copies such a row into a per-chunk buffer before the body reads it, in cache and on the
chunk's thread); a row whose sub-rows are contiguous is read in place. Arrays with no
such layout are copied by ``rows.py`` to contiguous ones before the call, as before.
"""
from __future__ import annotations

ROW_WORDS = 4  # int64 numbers per array in the row kernels' ``rs``
# the C side: where row r of array a starts (row_source.py's prelude)
ROW_MACRO = (f"#define AF_ROW(rs, a, r) ((rs)[{ROW_WORDS} * (a) + 2] == 1 ? "
             f"(r) * (rs)[{ROW_WORDS} * (a)] : \\\n"
             f"    ((r) / (rs)[{ROW_WORDS} * (a) + 2]) * (rs)[{ROW_WORDS} * (a)] + "
             f"((r) % (rs)[{ROW_WORDS} * (a) + 2]) * (rs)[{ROW_WORDS} * (a) + 1])\n")


def _collapse(dims: list) -> list:
    """``(size, stride)`` pairs with size-1 dims dropped and dims that step as one merged
    (outermost first)."""
    out: list = []
    for size, stride in dims:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return out


def leading(shape: tuple, strides: tuple, k: int, item: int) -> tuple | None:
    """``(outer, inner, count)`` in elements addressing the rows of an array of ``shape`` /
    ``strides`` (bytes) whose rows are its trailing ``k`` dims, or None when its leading dims
    don't collapse into two groups or a stride is not a whole number of elements."""
    lead = [(s, st) for s, st in zip(shape[:len(shape) - k], strides[:len(strides) - k])]
    if any(st % item for _, st in lead):
        return None
    groups = _collapse([(s, st // item) for s, st in lead])
    if not groups:
        return (0, 0, 1)
    if len(groups) == 1:
        return (groups[0][1], 0, 1)
    if len(groups) == 2:
        (_, outer), (count, inner) = groups
        return (outer, inner, count)
    return None


def sub_rows(shape: tuple, strides: tuple, k: int, item: int) -> int | None:
    """The stride in elements between the sub-rows of a row (its trailing ``k`` dims but the
    last collapsed into one index, the last unit-stride), or None where they don't collapse
    so (0 when the row has a single sub-row)."""
    if k < 2 or not shape:
        return None
    block = list(zip(shape[len(shape) - k:], strides[len(strides) - k:]))
    last_size, last_stride = block[-1]
    if last_size > 1 and last_stride != item:
        return None
    if any(st % item for _, st in block):
        return None
    groups = _collapse([(s, st // item) for s, st in block[:-1]])
    if not groups:
        return 0
    if len(groups) == 1:
        return groups[0][1]
    return None


__all__ = ["ROW_WORDS", "ROW_MACRO", "leading", "sub_rows"]
