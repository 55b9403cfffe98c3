"""Ranks that create one global tensor from different shapes or dtypes, or wrap different
modules in DDP, are told so on every rank (``tests/distributed/rank_disagree.py`` under
``mpiexec -n 2``)."""
import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(120)
def test_disagreeing_global_creation_and_ddp_raise_on_every_rank():
    code, secs, out = run_ranks(2, "rank_disagree.py")
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
