"""The reshape op's SBP rule: a split dim cut into several (features -> heads) or merged with
the dims after it stays split when the shards are whole rows; each rank's local reshape of
its shard gives its shard of the reshaped tensor."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from actorflow.ops.boxing import shard_range
from actorflow.ops.registry import get as get_op


def _sigs(shape: tuple, new: tuple, n: int) -> dict:
    """{input split dim: (output split dim, local attrs fn)} of the rule on ``n`` ranks."""
    # what the rule reads of its input (a placement of n ranks needs n processes)
    x = SimpleNamespace(_shape=shape, placement=SimpleNamespace(flat_ranks=tuple(range(n))))
    out = {}
    for sig in get_op("reshape").sbp_fn([x], {"shape": new}):
        if sig.ins[0][0] == "S":
            out[sig.ins[0][1]] = (sig.outs[0][1], sig.local)
    return out


def _shard(a: np.ndarray, d: int, n: int, i: int) -> np.ndarray:
    lo, hi = shard_range(a.shape[d], n, i)
    return a[(slice(None),) * d + (slice(lo, hi),)]


@pytest.mark.parametrize("shape, new, d, d2", [
    ((2, 3, 16), (2, 3, 4, 4), 2, 2),    # features -> (heads, head size)
    ((2, 3, 4, 4), (2, 3, 16), 2, 2),    # (heads, head size) -> features
    ((4, 3, 5), (12, 5), 0, 0),          # batch merged with time
    ((6, 5), (6, 5), 0, 0),              # kept
])
def test_split_dim_cut_or_merged_stays_split(shape, new, d, d2):
    n = 2
    sigs = _sigs(shape, new, n)
    assert sigs[d][0] == d2, sigs
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for i in range(n):
        attrs = sigs[d][1]({"shape": new}, i, n)
        got = _shard(a, d, n, i).reshape(attrs["shape"])
        np.testing.assert_array_equal(got, _shard(a.reshape(new), d2, n, i))


@pytest.mark.parametrize("shape, new, d", [
    ((2, 3, 6), (2, 3, 3, 2), 2),   # 3 heads over 2 ranks: a shard would cut a head
    ((3, 4), (12,), 0),             # 3 rows over 2 ranks: uneven, the merged split differs
])
def test_split_that_would_cut_rows_is_not_offered(shape, new, d):
    assert d not in _sigs(shape, new, 2)
