"""RNNs on global inputs on 2 ranks: the rank script ``global_rnn.py`` runs through
``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_rnns_on_global_inputs_make_global_initial_states_and_agree_with_torch():
    code, _, out = run_ranks(2, "global_rnn.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
