"""Small API names of OneFlow/PyTorch: set_printoptions, set/get_num_threads, Tensor memory
queries (pin_memory, is_pinned, get_device, offload/load/is_offloaded), local_to_global /
global_to_global / to_consistent, utils.tensor.to_torch, env.init_rdma, and flow.cuda.* on a
machine without CUDA (compared with PyTorch where it has the name)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import actorflow as flow
from actorflow.tensor_str import PRINT_OPTS
from tests.helpers import torch

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def printopts():
    saved = dict(PRINT_OPTS)
    yield
    PRINT_OPTS.clear()
    PRINT_OPTS.update(saved)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("opts", [dict(precision=2), dict(precision=6),
                                  dict(threshold=5, edgeitems=1), dict(sci_mode=True),
                                  dict(profile="short"), dict(linewidth=40, precision=3)])
def test_set_printoptions_like_torch(printopts, opts):
    x = np.array([[1.123456, -2.5, 3.25], [0.5, 10.0, -0.125]])
    flow.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    try:
        want = repr(torch.tensor(x)).replace("torch.", "actorflow.")
    finally:
        torch.set_printoptions(profile="default")
    got = repr(flow.tensor(x))
    assert "".join(got.split()) == "".join(want.split())  # same values and digits
    if "linewidth" in opts:
        assert max(len(line) for line in got.split("\n")[:-1]) <= opts["linewidth"]


def test_set_printoptions_full_profile_and_errors(printopts):
    big = flow.arange(2000)
    assert "..." in repr(big)
    flow.set_printoptions(profile="full")
    assert "..." not in repr(big) and "1999" in repr(big)
    flow.set_printoptions(profile="default")
    assert "..." in repr(big)
    flow.set_printoptions(sci_mode=False)
    assert repr(flow.tensor([1e-6, 1.0])).startswith("tensor([0.0000, 1.0000]")
    with pytest.raises(ValueError, match="profile"):
        flow.set_printoptions(profile="long")
    with pytest.raises(ValueError, match="precision"):
        flow.set_printoptions(precision=-1)


def test_set_num_threads_sets_intra_op_and_blas():
    from actorflow.vm.threads import blas_threads
    before = flow.get_num_threads()
    blas_before = blas_threads()
    try:
        flow.set_num_threads(1)
        assert flow.get_num_threads() == 1
        if blas_before is not None:
            assert blas_threads() == 1
        a = flow.randn(64, 64)
        np.testing.assert_allclose((a @ a).numpy(), a.numpy() @ a.numpy(), rtol=1e-5)
    finally:
        flow.set_num_threads(before)
        if blas_before is not None:
            flow.set_num_threads(before)
    with pytest.raises(ValueError, match="positive integer"):
        flow.set_num_threads(0)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_memory_queries_like_torch():
    f, t = flow.zeros(3), torch.zeros(3)
    assert f.is_pinned() is t.is_pinned() is False
    assert f.get_device() == t.get_device() == -1
    with pytest.raises(RuntimeError):
        t.pin_memory()
    with pytest.raises(RuntimeError, match="pin_memory: .*no.* accelerator|none"):
        f.pin_memory()
    with pytest.warns(UserWarning, match="only a non-CPU tensor can be offloaded"):
        assert f.offload() is None
    assert not f.is_offloaded()
    with pytest.warns(UserWarning, match="host memory"):
        f.load()
    assert not f.is_offloaded()


def test_local_to_global_and_global_to_global():
    p = flow.placement("cpu", ranks=[0])
    x = flow.arange(6.0).reshape(3, 2)
    g = x.local_to_global(p, flow.sbp.broadcast)
    assert g.is_global and g.sbp == (flow.sbp.broadcast,)
    s = g.global_to_global(sbp=flow.sbp.split(0))
    assert s.sbp == (flow.sbp.split(0),) and s.placement == p
    np.testing.assert_array_equal(s.to_local().numpy(), x.numpy())
    with pytest.raises(RuntimeError, match="must be a local tensor"):
        g.local_to_global(p, flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match="must be a global tensor"):
        x.global_to_global(p, flow.sbp.broadcast)
    with pytest.raises(ValueError, match="placement and sbp"):
        x.local_to_global(p)
    with pytest.raises(RuntimeError, match="to_consistent has been removed"):
        x.to_consistent(p, flow.sbp.broadcast)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_to_torch_shares_memory():
    from actorflow.utils.tensor import from_torch, to_torch
    x = flow.arange(6.0).reshape(2, 3)
    t = to_torch(x)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
    t[0, 0] = 7.0
    assert x[0, 0].item() == 7.0
    b = to_torch(flow.tensor([1.5, 2.0], dtype=flow.bfloat16))
    assert b.dtype == torch.bfloat16 and b.tolist() == [1.5, 2.0]
    np.testing.assert_array_equal(from_torch(t).numpy(), x.numpy())
    with pytest.raises(TypeError, match="expected an actorflow Tensor"):
        to_torch(np.zeros(2))


def test_import_does_not_import_torch():
    code = "import sys, actorflow; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_rdma():
    assert flow.env.rdma_is_initialized() is False
    with pytest.raises(RuntimeError, match="no RDMA transport"):
        flow.env.init_rdma()


def test_cuda_without_a_device():
    assert flow.cuda.is_available() is False and flow.cuda.device_count() == 0
    for name, args in [("current_device", ()), ("set_device", (0,)), ("synchronize", ()),
                       ("get_device_properties", (0,)), ("get_device_capability", ()),
                       ("get_device_name", ()), ("get_rng_state", ()),
                       ("set_rng_state", (flow.zeros(4, dtype=flow.uint8),)),
                       ("set_rng_state_all", ([flow.zeros(4, dtype=flow.uint8)],))]:
        with pytest.raises(RuntimeError, match=f"cuda.{name}: no CUDA device"):
            getattr(flow.cuda, name)(*args)
    assert flow.cuda.get_rng_state_all() == []
    assert flow.cuda.set_rng_state_all([]) is None
    for name in ("HalfTensor", "FloatTensor", "DoubleTensor", "BoolTensor", "ByteTensor",
                 "CharTensor", "IntTensor", "LongTensor"):
        cls = getattr(flow.cuda, name)
        assert not isinstance(flow.zeros(1), cls)
        with pytest.raises(TypeError, match=f"cuda.{name} not available"):
            cls(2)
