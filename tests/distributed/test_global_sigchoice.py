"""The signatures eager global op calls pick, as OneFlow picks them: the rank script
``global_sigchoice.py`` runs through ``mpiexec`` on 2 ranks."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_signature_choices_follow_oneflow_and_move_nothing_where_it_moves_nothing():
    code, _, out = run_ranks(2, "global_sigchoice.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
