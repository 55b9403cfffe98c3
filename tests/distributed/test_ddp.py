"""DistributedDataParallel and DistributedSampler: one-process checks here, several-process
ones through ``mpiexec`` on ``tests/distributed/ddp.py`` (prints ``OK rank R``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data.distributed import DistributedSampler as TorchSampler

import actorflow as flow
from actorflow.nn.parallel import DistributedDataParallel as DDP
from actorflow.utils.data import DistributedSampler
from tests.distributed.test_distributed import needs_mpi, run_ranks


@pytest.mark.parametrize("size", [0, 1, 7, 10, 13])
@pytest.mark.parametrize("replicas", [1, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_shards_as_pytorch(size, replicas, drop_last):
    data = list(range(size))
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        ref = TorchSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        assert len(ours) == len(ref)
        assert list(ours) == list(ref), (rank, list(ours), list(ref))


@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_shards_partition_the_dataset(drop_last):
    size, reps = 11, 3
    shards = [DistributedSampler(range(size), reps, r, seed=4, drop_last=drop_last)
              for r in range(reps)]
    got = [list(s) for s in shards]
    assert all(len(g) == len(s) for g, s in zip(got, shards))
    flat = sum(got, [])
    if drop_last:  # 9 distinct indices, two left out
        assert len(flat) == len(set(flat)) == 9
    else:  # every index, one repeated for padding
        assert set(flat) == set(range(size)) and len(flat) == 12
    again = [list(DistributedSampler(range(size), reps, r, seed=4, drop_last=drop_last))
             for r in range(reps)]
    assert again == got  # every rank orders alike (seeded by seed + epoch)
    for s in shards:
        s.set_epoch(1)
    assert [list(s) for s in shards] != got


def test_sampler_checks_rank_and_defaults_to_the_world():
    with pytest.raises(ValueError, match="invalid rank 2"):
        DistributedSampler(range(4), 2, 2)
    s = DistributedSampler(range(5))
    assert (s.num_replicas, s.rank, len(s)) == (1, 0, 5)
    assert sorted(s) == list(range(5))


def test_ddp_in_a_world_of_one_trains_like_the_module():
    flow.manual_seed(3)
    net = flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.ReLU(), flow.nn.Linear(5, 2))
    ref = flow.nn.Sequential(flow.nn.Linear(4, 5), flow.nn.ReLU(), flow.nn.Linear(5, 2))
    ref.load_state_dict(net.state_dict())
    ddp = DDP(net, bucket_size=2)
    assert list(ddp.state_dict()) == ["module." + k for k in net.state_dict()]
    x = flow.tensor(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    for m in (ddp, ref):
        opt = flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        for _ in range(3):
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()
    for a, b in zip(net.parameters(), ref.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with ddp.no_sync():
        ddp(x).sum().backward()
    # the wrapped module's attributes are the wrapper's too (OneFlow's DDP returns the module)
    lin = flow.nn.Linear(2, 3)
    wrapped = DDP(lin)
    assert wrapped.weight is lin.weight and wrapped.in_features == 2
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = wrapped.nothing


@pytest.mark.timeout(60)
def test_a_bucket_reduces_through_views_made_once_with_its_buffer():
    """``_reduce`` (in a world of one: the all-reduce keeps the values) averages a bucket's
    gradients through its flat buffer's per-parameter views, made with the buffer, not per
    step; gradients of other shapes/dtype get a new buffer and views."""
    from actorflow.nn.parallel.distributed import _Bucket, _reduce

    rng = np.random.default_rng(1)
    params = [flow.nn.Parameter(flow.zeros(*s)) for s in ((2, 3), (4,), (1, 2, 2))]
    bucket = _Bucket(params)
    for step in range(2):
        want = [rng.standard_normal(tuple(p.shape)).astype(np.float32) for p in params]
        for p, w in zip(params, want):
            p.grad = flow.tensor(w)
        _reduce(bucket, 4)
        if step == 0:
            flat, pieces = bucket.flat, list(bucket.pieces)
        assert bucket.flat is flat and all(a is b for a, b in zip(bucket.pieces, pieces))
        for p, w in zip(params, want):
            np.testing.assert_allclose(p.grad.numpy(), w / 4, rtol=1e-6)
        np.testing.assert_allclose(flat.numpy(), np.concatenate([w.ravel() / 4 for w in want]),
                                   rtol=1e-6)
    assert [tuple(v.shape) for v in pieces] == [(2, 3), (4,), (1, 2, 2)]
    params = [flow.nn.Parameter(flow.zeros(3, dtype=flow.float64))]
    params[0].grad = flow.tensor(np.arange(3.0))
    bucket.params = params
    _reduce(bucket, 2)
    assert bucket.flat is not flat and bucket.flat.dtype == flow.float64
    np.testing.assert_allclose(params[0].grad.numpy(), [0, 0.5, 1])


def test_ddp_checks_its_arguments():
    with pytest.raises(TypeError, match="nn.Module"):
        DDP(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="bucket_size"):
        DDP(flow.nn.Linear(2, 2), bucket_size=0)


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 4])
def test_ddp_trains_like_one_process_and_like_global_tensors(n):
    code, secs, out = run_ranks(n, "ddp.py")
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(300)
def test_gpt_example_data_parallel_gives_the_one_process_losses(tmp_path):
    import json

    from examples import gpt

    code, secs, out = run_ranks(2, "gpt_ddp.py", str(tmp_path), timeout=280)
    assert code == 0, out
    with open(tmp_path / "losses.json") as f:
        got = json.load(f)
    args = gpt.build_parser().parse_args(
        ["--mode", "eager", "--steps", "4", "--batch-size", "4", "--block-size", "16",
         "--n-embd", "16", "--n-layer", "1", "--n-head", "2", "--schedule-steps", "4",
         "--sample-len", "10", "--no-progress", "--out", str(tmp_path / "one")])
    want = gpt.train(args)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5)
    # the checkpoint rank 0 wrote holds the one-process parameters (AdamW moves each weight
    # by about lr = 3e-3 a step whatever its gradient's size, so float32 rounding of a tiny
    # gradient may show up to a few 1e-6)
    a = flow.load(tmp_path / "run" / "checkpoint.safetensors")["model"]
    b = flow.load(tmp_path / "one" / "checkpoint.safetensors")["model"]
    assert list(a) == list(b)
    for k in b:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), rtol=1e-4, atol=1e-4)
