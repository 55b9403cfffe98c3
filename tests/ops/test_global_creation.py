"""Creation ops that take ``placement=`` and ``sbp=`` (``empty`` and ``normal`` too), on a
placement of this one process: the result is global with that layout and the values of the
local op (``empty``: zeros, so that the ranks' shards agree)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow

PL = flow.placement("cpu", ranks=[0])


@pytest.mark.parametrize("sbp", [flow.sbp.split(0), flow.sbp.split(1), flow.sbp.broadcast])
def test_empty_with_placement_is_a_global_tensor_of_zeros(sbp):
    t = flow.empty(4, 3, dtype=flow.float64, placement=PL, sbp=sbp)
    assert t.is_global and t.sbp == (sbp,) and t.placement == PL
    assert tuple(t.shape) == (4, 3) and t.dtype == flow.float64
    np.testing.assert_array_equal(t.numpy(), np.zeros((4, 3)))


def test_normal_with_placement_gives_the_local_values_whatever_the_sbp():
    flow.manual_seed(3)
    want = flow.normal(2.0, 0.5, (5, 4)).numpy()
    for sbp in (flow.sbp.split(0), flow.sbp.broadcast):
        flow.manual_seed(3)
        t = flow.normal(2.0, 0.5, (5, 4), placement=PL, sbp=sbp)
        assert t.is_global and t.sbp == (sbp,)
        np.testing.assert_array_equal(t.numpy(), want)


def test_global_creation_needs_both_placement_and_sbp():
    with pytest.raises(ValueError, match="placement and sbp"):
        flow.empty(2, 2, placement=PL)
    with pytest.raises(ValueError, match="placement and sbp"):
        flow.normal(0.0, 1.0, (2,), sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match="normal"):
        flow.normal(flow.zeros(2), 1.0, placement=PL, sbp=flow.sbp.broadcast)
