"""Suite-wide fixtures: every test ends with the VM drained, and a kernel error that no sync
point reported fails the test that caused it (instead of surfacing in a later test)."""
from __future__ import annotations

import pytest

import actorflow as flow


@pytest.fixture(autouse=True)
def _vm_drained():
    yield
    flow.synchronize()
