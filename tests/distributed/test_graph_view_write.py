"""Writes through views in a distributed nn.Graph (``dispatch/lazy_views.py``): the rank
script ``graph_view_write.py`` runs through ``mpiexec`` on 2 ranks, on both executors."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_writes_through_views_of_a_split_tensor_train_like_one_process(executor):
    code, _, out = run_ranks(2, "graph_view_write.py", executor, timeout=290)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
