"""SBP rules of roll, tril/triu, pad, var/std and sort/topk on 2 ranks: the rank script
``global_rearrange.py`` runs through ``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_rearranging_ops_keep_a_split_they_leave_alone_and_agree_with_torch():
    code, _, out = run_ranks(2, "global_rearrange.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
