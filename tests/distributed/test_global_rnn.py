"""RNNs on global inputs on 2 ranks: the rank script ``global_rnn.py`` runs through
``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_rnns_on_global_inputs_make_global_initial_states_and_agree_with_torch():
    check_eager_2("global_rnn.py")
