"""Python numbers meeting eager global tensors (``setitem``, ``masked_fill_``, ``fill_``,
``clamp_``...): the rank script ``global_scalars.py`` runs through ``mpiexec`` on 2 ranks."""
from __future__ import annotations

import pytest

from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(200)
def test_python_numbers_act_as_broadcast_values_on_global_tensors():
    code, _, out = run_ranks(2, "global_scalars.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
