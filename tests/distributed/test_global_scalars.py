"""Python numbers meeting eager global tensors (``setitem``, ``masked_fill_``, ``fill_``,
``clamp_``...): the rank script ``global_scalars.py`` runs through ``mpiexec`` on 2 ranks."""
from __future__ import annotations

import pytest

from tests.distributed.shared import EAGER_2_TIMEOUT, check_eager_2
from tests.distributed.test_distributed import needs_mpi


@needs_mpi
@pytest.mark.timeout(EAGER_2_TIMEOUT + 150)
def test_python_numbers_act_as_broadcast_values_on_global_tensors():
    check_eager_2("global_scalars.py")
