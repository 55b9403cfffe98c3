"""The one SBP value type: its codecs round-trip, its text form is the Job's, and its layout
math matches numpy.array_split (one axis) and nested array_split (n-D)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.framework import sbp_parallel as sp


ALL = [flow.sbp.split(0), flow.sbp.split(3), flow.sbp.broadcast, flow.sbp.partial_sum,
       flow.sbp.partial_max]


def test_public_names_are_the_one_type():
    assert flow.sbp.sbp is sp.SbpParallel
    assert flow.sbp.split(1) == sp.split(1) and flow.sbp.broadcast is sp.broadcast
    assert repr(flow.sbp.split(2)) == "actorflow.sbp.split(dim=2)"
    assert repr(flow.sbp.partial_sum) == "actorflow.sbp.partial_sum"


@pytest.mark.parametrize("s", ALL, ids=repr)
def test_attr_and_text_round_trip(s):
    assert sp.SbpParallel.from_attr(s.attr()) == s
    assert sp.sbp_attr(sp.sbp_str(s.attr())) == s.attr()


def test_text_form():
    assert sp.sbp_str(sp.S(1)) == "S(1)" and sp.sbp_str(sp.P) == "P"
    nd = (sp.S(0), sp.B)
    assert sp.nd_sbp_str(nd) == "(S(0), B)" and sp.nd_sbp_attr("(S(0), B)") == nd
    assert sp.nd_sbp_str((sp.M,)) == "M" and sp.nd_sbp_attr("S(2)") == (sp.S(2),)
    assert sp.nd_value(sp.nd_attrs((flow.sbp.split(1), flow.sbp.broadcast))) == (
        flow.sbp.split(1), flow.sbp.broadcast)


@pytest.mark.parametrize("size,n", [(0, 3), (1, 2), (7, 3), (8, 4), (5, 7)])
def test_shard_range_is_array_split(size, n):
    pieces = np.array_split(np.arange(size), n)
    for i in range(n):
        a, b = sp.shard_range(size, n, i)
        np.testing.assert_array_equal(np.arange(size)[a:b], pieces[i])
        assert sp.shard_shape((2, size), sp.S(1), n, i) == (2, len(pieces[i]))
        assert sp.shard_shape((2, size), sp.B, n, i) == (2, size)


def test_nd_shard_shape_nests_array_split():
    x = np.arange(7 * 5).reshape(7, 5)
    hier = (2, 3)
    for c0 in range(2):
        for c1 in range(3):
            want = np.array_split(np.array_split(x, 2, axis=0)[c0], 3, axis=0)[c1].shape
            assert sp.nd_shard_shape(x.shape, (sp.S(0), sp.S(0)), hier, (c0, c1)) == want
            want = np.array_split(x, 3, axis=1)[c1].shape
            assert sp.nd_shard_shape(x.shape, (sp.B, sp.S(1)), hier, (c0, c1)) == want


def test_split_of_a_missing_dim_names_the_shape():
    with pytest.raises(ValueError, match=r"split\(2\) of a tensor of shape \(4, 4\)"):
        sp.shard_shape((4, 4), sp.S(2), 2, 0)
    with pytest.raises(RuntimeError):
        sp.shard_shape((4,), sp.S(1), 2, 0)
    with pytest.raises(ValueError, match="non-negative int"):
        flow.sbp.split(-1)


def test_coords_and_groups_on_a_one_rank_world():
    pl = flow.placement("cpu", [[0]])
    assert sp.coords_of(pl, 0) == (0, 0) and sp.coords_of(pl, 1) is None
    assert sp.group_ranks(pl, (0, 0), 1) == (0,)
