"""The SBP rules of the linalg decompositions, scans, index_fill and histc on 2 processes
(``global_apimath.py`` under mpiexec)."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(120)
def test_apimath_sbp_rules_match_one_process():
    code, secs, out = run_ranks(2, "global_apimath.py")
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
