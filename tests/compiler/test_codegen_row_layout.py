"""Strided inputs a row kernel reads in place (compiler/codegen/row_layout.py): the layout words
against NumPy's own addressing, and layer norms over two trailing dims of permuted views (rows
gathered in C) against the NumPy kernel, float32 and float16, one thread and two."""
from __future__ import annotations

import numpy as np
import pytest

from actorflow.compiler.codegen import row_layout, rows
from actorflow.framework import dtype as dt
from actorflow.ops import parallel, registry
from tests.compiler.test_codegen_rows import _close, _ln_attrs

pytestmark = pytest.mark.timeout(300)


def _row_start(words: tuple, r: int) -> int:
    outer, inner, count = words
    return (r // count) * outer + (r % count) * inner


@pytest.mark.parametrize("shape, perm, k", [
    ((2, 5, 3, 4), (0, 2, 1, 3), 2),      # attention's heads: (B, T, H, E) -> (B, H, T, E)
    ((6, 4, 8), (0, 1, 2), 2),            # contiguous: one stride
    ((3, 4, 5, 6), (1, 0, 2, 3), 2),      # leading dims swapped
    ((2, 3, 4, 5), (0, 1, 3, 2), 2),      # last dim strided: no sub-row layout
    ((2, 3, 2, 4, 5), (2, 0, 3, 1, 4), 2),  # three leading groups
    ((4, 1, 3, 6), (0, 2, 1, 3), 2),      # a size-1 dim
])
def test_words_address_every_row_as_numpy_does(shape, perm, k):
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = base.transpose(perm)
    item = a.itemsize
    lead = row_layout.leading(a.shape, a.strides, k, item)
    sub = row_layout.sub_rows(a.shape, a.strides, k, item)
    lead_dims = a.shape[:a.ndim - k]
    rows_n = int(np.prod(lead_dims))
    flat = base.reshape(-1)
    if lead is not None:
        for r in range(rows_n):
            want = a[np.unravel_index(r, lead_dims)]   # this row's block, as NumPy sees it
            start = _row_start(lead, r)
            if sub is not None:
                m = a.shape[-1]
                q = want.size // m
                got = np.stack([flat[start + u * sub: start + u * sub + m] for u in range(q)])
                np.testing.assert_array_equal(got.reshape(want.shape), want)
            else:
                assert flat[start] == want.reshape(-1)[0]
    if perm == (0, 1, 3, 2):
        assert sub is None
    if len(shape) == 5:
        assert lead is None


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_over_two_dims_of_a_permuted_view(dtype, threads):
    """x (N, A, B) as a permutation of (A, N, B) and of (N, B, A) (last dim strided: copied
    first); normalised over (A, B): the first is gathered row by row in C, the second copied."""
    rng = np.random.default_rng(11)
    npd = np.dtype(dtype)
    d = {"float32": dt.float32, "float16": dt.float16}[dtype]
    N, A, B = 300, 8, 16
    before = parallel.threads()
    parallel.set_threads(threads)
    try:
        for base, perm, copied in ((np.empty((A, N, B), npd), (1, 0, 2), False),
                                   (np.empty((N, B, A), npd), (0, 2, 1), True)):
            base[...] = rng.standard_normal(base.shape)
            x = base.transpose(perm)
            attrs = _ln_attrs(2, x.shape, False, False)
            kern, = rows.row_kernels_for([("layer_norm", attrs, [(x.shape, d)],
                                           [(x.shape, d), ((N, 1, 1), d), ((N, 1, 1), d)])])
            assert kern is not None
            got = [np.empty((N, A, B), npd), np.empty((N, 1, 1), npd), np.empty((N, 1, 1), npd)]
            for step in range(2):
                base *= npd.type(1.5)  # new values, the same arrays
                kern([x], got, attrs)
                ref = [np.empty_like(o) for o in got]
                registry.get("layer_norm").kernel_cpu([x], ref, attrs)
                for g, r in zip(got, ref):
                    _close(g, r, A * B, f"layer_norm {perm}, call {step}")
            call, = kern.prepared.values()
            assert bool(call.refresh) == copied
            assert kern.calls == 2
    finally:
        parallel.set_threads(before)


def test_attention_without_batch_dims_gathers_column_slices(monkeypatch):
    """q and k as column slices of wider matrices, no batch dims (one row: the whole block):
    gathered in C, with scratch sized by the blocks, not by the arrays' last dims."""
    from actorflow.ops import attention_rows
    monkeypatch.setenv(attention_rows.ENV, "1")
    L, S, E = 64, 48, 32
    rng = np.random.default_rng(2)
    q = rng.standard_normal((L, 2 * E)).astype(np.float32)[:, :E]
    k = rng.standard_normal((S, 2 * E)).astype(np.float32)[:, E:]
    v = rng.standard_normal((S, E)).astype(np.float32)
    attrs = {"scale": 0.3, "is_causal": True}
    f = dt.float32
    kern, = rows.row_kernels_for([("scaled_dot_product_attention", attrs,
                                   [((L, E), f), ((S, E), f), ((S, E), f)],
                                   [((L, E), f), ((L, S), f)])])
    got = [np.empty((L, E), np.float32), np.empty((L, S), np.float32)]
    kern([q, k, v], got, attrs)
    ref = [np.empty_like(g) for g in got]
    registry.get("scaled_dot_product_attention").kernel_cpu([q, k, v], ref, attrs)
    for g, r in zip(got, ref):
        _close(g, r, S + 2 * E, "attention of column slices")
    call, = kern.prepared.values()
    assert kern.calls == 1 and not call.refresh
