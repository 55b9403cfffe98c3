"""The signatures eager global op calls pick, as OneFlow picks them: the rank script
``global_sigchoice.py`` runs through ``mpiexec`` on 2 ranks."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_signature_choices_follow_oneflow_and_move_nothing_where_it_moves_nothing():
    check_eager_2("global_sigchoice.py")
