"""Eager global tensors (placement, 1-D SBP, boxing, the eager-global interpreter): one-process
checks here, several-process ones through ``mpiexec`` on the scripts in ``tests/distributed/``
(each prints ``OK rank R``)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.distributed.test_distributed import needs_mpi, run_ranks


def test_placement_and_sbp_values():
    p = flow.placement("cpu", [0])
    assert p == flow.placement(type="cpu", ranks=[0]) == flow.placement.all("cpu")
    assert hash(p) == hash(flow.placement("cpu", [0]))
    assert repr(p) == 'actorflow.placement(type="cpu", ranks=[0])'
    assert repr(flow.sbp.split(1)) == "actorflow.sbp.split(dim=1)"
    assert flow.sbp.split(1) == flow.sbp.split(1) != flow.sbp.split(0)
    assert repr(flow.sbp.broadcast) == "actorflow.sbp.broadcast"
    assert repr(flow.sbp.partial_sum) == "actorflow.sbp.partial_sum"
    assert flow.env.all_device_placement("cpu") == p
    assert flow.placement("cpu", [[0]]).hierarchy == (1, 1)
    with pytest.raises(ValueError, match="rank 1 is not in 0..0"):
        flow.placement("cpu", [0, 1])
    with pytest.raises(ValueError, match="device type"):
        flow.placement("cuda", [0])
    with pytest.raises(ValueError, match="distinct"):
        flow.placement("cpu", [0, 0])


def test_one_process_global_tensor_round_trip():
    p = flow.placement("cpu", [0])
    x = flow.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    g = x.to_global(p, flow.sbp.split(1))
    assert g.is_global and not g.is_local and x.is_local and not x.is_global
    assert g.placement == p and g.sbp == (flow.sbp.split(1),) and g.shape == (2, 3)
    y = (g.to_global(sbp=flow.sbp.partial_sum) * 3.0).sum()
    assert y.item() == 45.0
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), 3.0))
    assert "sbp=(actorflow.sbp.split(dim=1),)" in repr(g)
    with pytest.raises(ValueError, match="2-D SBP is not supported yet"):
        flow.ones(2, placement=flow.placement("cpu", [[0]]),
                  sbp=(flow.sbp.broadcast, flow.sbp.broadcast))
    with pytest.raises(ValueError, match="mixes a local tensor"):
        g + x
    with pytest.raises(ValueError, match="needs both placement and sbp"):
        x.to_global(p)
    with pytest.raises(ValueError, match="split"):
        x.to_global(p, flow.sbp.split(2))
    with pytest.raises(OpError, match="dim 2 is out of range"):
        flow.zeros(2, 3, placement=p, sbp=flow.sbp.split(2))
    with pytest.raises(TypeError, match="flow.sbp.split"):
        flow.zeros(2, placement=p, sbp="S0")
    # an op without an SBP rule runs broadcast
    c = flow.cumsum(g, dim=0)
    assert c.sbp == (flow.sbp.broadcast,)
    np.testing.assert_array_equal(c.numpy(), np.cumsum(np.arange(6.0).reshape(2, 3), 0))


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_boxing_on_several_ranks(n):
    code, secs, out = run_ranks(n, "global_boxing.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 3])
def test_ops_with_sbp_rules_match_one_process(n):
    code, secs, out = run_ranks(n, "global_ops.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_mlp_with_global_tensors_trains_like_one_process(n):
    code, secs, out = run_ranks(n, "global_mlp.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_optimizers_on_global_parameters_match_one_process(n):
    code, secs, out = run_ranks(n, "global_optim.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_checkpoints_of_global_state(n, tmp_path):
    code, secs, out = run_ranks(n, "global_ckpt.py", str(tmp_path))
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
def test_to_global_checks_meta_and_takes_grad_sbp_and_copy():
    code, secs, out = run_ranks(2, "global_meta.py")
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out
