"""flow.boxing and flow.boxing.nccl: OneFlow's NCCL switches are accepted with their types
checked and recorded; a wrong type is an error naming the switch."""
import pytest

import actorflow as flow


def test_switches_are_checked_and_recorded():
    flow.boxing.enable_fusion(False)
    flow.boxing.nccl.enable_use_compute_stream(False)
    flow.boxing.nccl.set_fusion_threshold_mbytes(16)
    flow.boxing.nccl.set_stream_num(2)
    flow.boxing.nccl.allow_fuse_all_reduce(True)
    s = flow.boxing.SETTINGS
    assert s["enable_fusion"] is False and s["nccl.enable_use_compute_stream"] is False
    assert s["nccl.set_fusion_threshold_mbytes"] == 16 and s["nccl.set_stream_num"] == 2
    assert s["nccl.allow_fuse_all_reduce"] is True
    for name in flow.boxing.nccl.__all__:
        assert callable(getattr(flow.boxing.nccl, name))


def test_wrong_values_are_refused():
    with pytest.raises(TypeError, match="nccl.set_stream_num: expected an int"):
        flow.boxing.nccl.set_stream_num(True)
    with pytest.raises(TypeError, match="nccl.allow_fuse_reduce: expected a bool"):
        flow.boxing.nccl.allow_fuse_reduce(1)
    with pytest.raises(ValueError, match="nccl.set_fusion_max_ops_num: expected a non-negative"):
        flow.boxing.nccl.set_fusion_max_ops_num(-1)
