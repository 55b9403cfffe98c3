"""Tensor.new and Tensor.type_as with global tensors on 2 ranks: the rank script
``global_new_like.py`` runs through ``mpiexec``."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_new_and_type_as_follow_a_global_tensor_as_oneflow():
    code, _, out = run_ranks(2, "global_new_like.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
