"""SBP rules of roll, tril/triu, pad, var/std and sort/topk on 2 ranks: the rank script
``global_rearrange.py`` runs through ``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_rearranging_ops_keep_a_split_they_leave_alone_and_agree_with_torch():
    check_eager_2("global_rearrange.py")
