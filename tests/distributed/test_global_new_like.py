"""Tensor.new and Tensor.type_as with global tensors on 2 ranks: the rank script
``global_new_like.py`` runs through ``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_new_and_type_as_follow_a_global_tensor_as_oneflow():
    check_eager_2("global_new_like.py")
