"""Ranks that disagree on a collective's shapes, dtypes or root, or on a transfer's shape and
dtype, get an error naming the op, the ranks and both values, on every rank concerned, and the
program goes on (issue 25, item 3)."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("n, case, words", [
    (2, "all_reduce_shape", "comm.all_reduce: the ranks disagree on what they pass (rank 0: "
                            "((3,), 'float32'); rank 1: ((4,), 'float32'))"),
    (3, "all_reduce_dtype", "rank 1: ((4,), 'float64')"),
    (2, "all_reduce_large_shape", "rank 1: ((1048577,), 'float32')"),
    (3, "broadcast_src", "comm.broadcast: the ranks disagree on what they pass (ranks 0, 1: "
                         "((2,), 'float32', 'src', 0); rank 2: ((2,), 'float32', 'src', 1))"),
    (2, "all_gather_shape", "comm.all_gather: the ranks disagree"),
    (3, "reduce_dst", "'dst', 1)"),
])
def test_collectives_whose_ranks_disagree_raise_on_every_rank(n, case, words):
    code, _, out = run_ranks(n, "rank_mismatch.py", case, timeout=150,
                             env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code == 0, out
    # (the ranks' lines may interleave in the output: look for each rank's piece)
    assert out.count("RankMismatchError: comm.") >= n and words in out, out
    for r in range(n):
        assert f"CAUGHT rank {r}: " in out and f"ALIVE rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("n, case, words", [
    (2, "recv_larger", "comm.recv: rank 0 sent (3,) float32, rank 1 receives into (5,) float32"),
    (3, "recv_out_meta", "rank 0 sent (4,) float32, rank 1 receives into (6,) float32"),
    (2, "recv_dtype", "rank 0 sent (4,) int64, rank 1 receives into (4,) float32"),
])
def test_transfers_whose_shapes_disagree_fail_the_receive(n, case, words):
    code, _, out = run_ranks(n, "rank_mismatch.py", case, timeout=150,
                             env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code == 0, out
    assert "CAUGHT rank 1: " in out and "RankMismatchError: comm.recv" in out, out
    assert words in out and out.count("RankMismatchError") == 1, out
    assert "OK rank 0" in out, out
    for r in range(n):
        assert f"ALIVE rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("n, case", [(2, "same"), (3, "same"), (3, "recv_right")])
def test_agreeing_ranks_are_unaffected(n, case):
    code, _, out = run_ranks(n, "rank_mismatch.py", case, timeout=150)
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out and f"ALIVE rank {r}" in out, out
