"""``flow.utils.global_view.to_global`` on a placement that leaves ranks out: the structure
comes from the placement's first rank (rank script ``global_view_none.py``, 2 ranks)."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_to_global_with_none_on_ranks_outside_the_placement_takes_rank0s_structure():
    code, _, out = run_ranks(2, "global_view_none.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(200)
def test_global_mode_makes_creation_ops_global_on_two_ranks():
    code, _, out = run_ranks(2, "global_mode.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
