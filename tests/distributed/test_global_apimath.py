"""The SBP rules of the linalg decompositions, scans, index_fill and histc on 2 processes
(``global_apimath.py`` under mpiexec)."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_apimath_sbp_rules_match_one_process():
    check_eager_2("global_apimath.py")
