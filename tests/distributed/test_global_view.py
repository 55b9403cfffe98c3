"""``flow.utils.global_view.to_global`` on a placement that leaves ranks out: the structure
comes from the placement's first rank (rank script ``global_view_none.py``, 2 ranks)."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_to_global_with_none_on_ranks_outside_the_placement_takes_rank0s_structure():
    check_eager_2("global_view_none.py")


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_global_mode_makes_creation_ops_global_on_two_ranks():
    check_eager_2("global_mode.py")
