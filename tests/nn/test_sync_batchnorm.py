"""SyncBatchNorm and convert_sync_batchnorm: one-process behaviour here; two ranks through
``mpiexec`` on ``tests/distributed/sync_bn.py`` (against PyTorch's BatchNorm over the whole
batch, forward, backward and running statistics)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import actorflow as flow
from tests.distributed.test_distributed import needs_mpi, run_ranks


@pytest.mark.timeout(120)
@needs_mpi
def test_two_ranks_match_one_process_batch_norm_over_the_whole_batch():
    code, secs, out = run_ranks(2, "sync_bn.py", timeout=110)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


def test_one_process_is_an_ordinary_batch_norm_with_gradients():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 3, 5))
    bn = flow.nn.SyncBatchNorm(3).to(flow.float64)
    ref = torch.nn.BatchNorm1d(3).double()
    x = flow.tensor(X, requires_grad=True)
    tx = torch.from_numpy(X).requires_grad_()
    bn(x).square().sum().backward()
    ref(tx).square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy(), rtol=1e-12)


def test_convert_sync_batchnorm_replaces_batch_norms_and_keeps_their_state():
    net = flow.nn.Sequential(flow.nn.Conv2d(2, 3, 1), flow.nn.BatchNorm2d(3, momentum=0.2),
                             flow.nn.Sequential(flow.nn.BatchNorm1d(4, affine=False)),
                             flow.nn.InstanceNorm2d(3))
    net[1].eval()
    w, rm = net[1].weight, net[1].running_mean
    out = flow.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert out is net
    assert type(net[1]) is flow.nn.SyncBatchNorm and type(net[2][0]) is flow.nn.SyncBatchNorm
    assert type(net[3]) is flow.nn.InstanceNorm2d and type(net[0]) is flow.nn.Conv2d
    assert net[1].weight is w and net[1].running_mean is rm and net[1].momentum == 0.2
    assert not net[1].training and net[2][0].training and net[2][0].weight is None
    top = flow.nn.SyncBatchNorm.convert_sync_batchnorm(flow.nn.BatchNorm3d(2))
    assert type(top) is flow.nn.SyncBatchNorm
    with pytest.raises(ValueError, match="process_group"):
        flow.nn.SyncBatchNorm.convert_sync_batchnorm(net, process_group=object())


def test_bad_input_is_reported_with_its_shape():
    with pytest.raises(ValueError, match=r"SyncBatchNorm.*\(3,\)"):
        flow.nn.SyncBatchNorm(3)(flow.ones(3))
