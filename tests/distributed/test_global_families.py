"""OneFlow's global behaviour of op families met by its global test suite (issue #24): each
rank script runs through ``mpiexec`` on 2 ranks and prints ``OK rank R``."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


def _run(script: str) -> None:
    check_eager_2(script)


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_like_creation_takes_placement_and_sbp_and_max_unpool_stays_global():
    _run("global_like.py")


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_ops_along_a_dim_keep_other_splits_as_oneflow():
    _run("global_alongdim.py")


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_numpy_array_operand_is_broadcast_on_the_global_tensors_placement():
    _run("global_ndarray.py")


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_sbp_rules_of_reductions_gathers_views_losses_and_eval_batch_norm_move_nothing():
    _run("global_sbp_rules.py")
