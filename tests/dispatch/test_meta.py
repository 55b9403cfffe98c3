"""The meta device: tensors with a shape and a dtype but no data; ops on them run inference
only (``dispatch/meta.py``), creation functions take ``device="meta"``, modules can be built
there and given memory with ``to_empty`` (``nn.utils.skip_init``)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import torch


def _same_meta(t, ref):
    assert t.device == flow.device("meta") and t.is_meta
    assert tuple(t.shape) == tuple(ref.shape)
    assert t.dtype.name == str(ref.dtype).split(".")[1]


def test_creation_on_meta_matches_torch_metadata():
    pairs = [
        (flow.Tensor(3, 2, device="meta"), torch.Tensor(3, 2).to("meta")),
        (flow.tensor([3, 2], device="meta"), torch.tensor([3, 2], device="meta")),
        (flow.tensor([[1.5]], device="meta"), torch.tensor([[1.5]], device="meta")),
        (flow.ones(3, 2, device="meta"), torch.ones(3, 2, device="meta")),
        (flow.empty(4, dtype=flow.float64, device="meta"),
         torch.empty(4, dtype=torch.float64, device="meta")),
        (flow.arange(5, device="meta"), torch.arange(5, device="meta")),
        (flow.randn(2, 3, device=flow.device("meta")), torch.randn(2, 3, device="meta")),
    ]
    for got, want in pairs:
        _same_meta(got, want)
    x = flow.ones(3, 2, device="meta")
    _same_meta(flow.zeros_like(x), torch.zeros(3, 2))  # *_like keeps the meta device
    _same_meta(flow.randn(2, 2).to("meta"), torch.randn(2, 2))
    assert flow.ones(2, device="meta", requires_grad=True).requires_grad


def test_ops_on_meta_tensors_infer_shapes_and_dtypes():
    x = flow.tensor([3, 2], device="meta")
    _same_meta(x + 1, torch.tensor([3, 2]) + 1)
    _same_meta(x.clone(), torch.tensor([3, 2]))
    _same_meta(x * 0.5, torch.tensor([3, 2]) * 0.5)  # int * float: float32
    a, b = flow.empty(4, 5, device="meta"), flow.empty(5, 6, device="meta")
    _same_meta(flow.matmul(a, b).sum(1), torch.empty(4, 6).sum(1))
    _same_meta(a.reshape(2, 10).transpose(0, 1), torch.empty(10, 2))
    _same_meta(flow.cat([a, a], 0), torch.empty(8, 5))
    cpu = flow.ones(4, 5)
    _same_meta(a + cpu, torch.empty(4, 5))  # a cpu operand joins a meta op
    a.copy_(cpu)  # writing into a meta tensor is a no-op, as in PyTorch
    with pytest.raises(RuntimeError, match="can't write the result of an op on meta tensors"):
        cpu.add_(a)
    with pytest.raises(Exception, match=r"matmul: inner dimensions differ.*\(4, 5\), \(4, 5\)"):
        flow.matmul(a, a)  # inference errors are the usual ones


def test_meta_tensors_have_no_data():
    x = flow.ones(2, 3, device="meta")
    with pytest.raises(RuntimeError, match="device 'meta' has no data"):
        x.numpy()
    with pytest.raises(RuntimeError, match="device 'meta' has no data"):
        x[0, 0].item()
    with pytest.raises(NotImplementedError, match="cannot copy out of a meta tensor"):
        x.to("cpu")
    assert "device='meta'" in repr(x) and "(2, 3)" in repr(x)


def test_autograd_through_meta_gives_meta_gradients():
    w = flow.empty(3, 4, device="meta", requires_grad=True)
    y = (flow.randn(2, 3, device="meta") @ w).relu().sum()
    y.backward()
    _same_meta(w.grad, torch.empty(3, 4))


def test_modules_on_meta_and_to_empty():
    m = flow.nn.Sequential(flow.nn.Linear(3, 4, device="meta"), flow.nn.ReLU(),
                           flow.nn.Linear(4, 2, device="meta"))
    for p in m.parameters():
        assert p.device == flow.device("meta") and p.requires_grad
    _same_meta(m(flow.empty(5, 3, device="meta")), torch.empty(5, 2))
    m.to_empty(device="cpu")
    for p in m.parameters():
        assert p.device == flow.device("cpu") and isinstance(p, flow.nn.Parameter)
    m[0].weight.data.fill_(1.0)
    np.testing.assert_allclose(m[0].weight.numpy(), np.ones((4, 3)))
    m.to("meta")
    assert all(p.is_meta for p in m.parameters())
    lin = flow.nn.utils.skip_init(flow.nn.Linear, 4, 3)
    assert lin.weight.device == flow.device("cpu") and tuple(lin.weight.shape) == (3, 4)
    assert lin.weight.requires_grad


def test_global_meta_tensors_keep_metadata_through_ops_boxing_and_backward():
    pm, pc = flow.placement("meta", ranks=[0]), flow.placement("cpu", ranks=[0])
    B, S0 = flow.sbp.broadcast, flow.sbp.split(0)
    for x, y in [(flow.Tensor(3, 2, placement=pm, sbp=B), flow.Tensor(3, 2, placement=pc, sbp=B)),
                 (flow.tensor([3, 2], placement=pm, sbp=B), flow.tensor([3, 2], placement=pc,
                                                                         sbp=B)),
                 (flow.zeros(4, 5, dtype=flow.float64, placement=pm, sbp=S0),
                  flow.zeros(4, 5, dtype=flow.float64, placement=pc, sbp=S0))]:
        assert (x.dtype, x.shape, x.sbp) == (y.dtype, y.shape, y.sbp)
        assert x.placement.type == "meta" and x.is_global
        loc = x.to_local()
        assert loc.is_meta and (loc.shape, loc.dtype) == (y.to_local().shape, y.dtype)
        c = x.clone()
        assert (c.placement, c.sbp, c.shape, c.dtype) == (x.placement, x.sbp, x.shape, x.dtype)
        z = x * 2 + 1
        assert z.placement == pm and z.to_local().is_meta and z.shape == y.shape
        ref = (y * 2 + 1).to_global(sbp=B)
        assert x.to_global(sbp=B).sbp == ref.sbp and (z.to_global(sbp=B).shape == ref.shape)
    w = flow.tensor(np.ones((4, 3)), placement=pm, sbp=S0, requires_grad=True)
    (w * w).sum().backward()
    assert w.grad.placement == pm and w.grad.shape == (4, 3) and w.grad.to_local().is_meta
    m = flow.zeros(3, 4, device="meta").to_global(placement=pm, sbp=flow.sbp.split(1))
    assert m.shape == (3, 4) and m.to_local().is_meta
    assert "placement=" in repr(m) and "shape=(3, 4)" in repr(m)


def test_global_meta_tensors_refuse_data_and_mixing():
    pm = flow.placement("meta", ranks=[0])
    x = flow.zeros(3, placement=pm, sbp=flow.sbp.broadcast)
    with pytest.raises(RuntimeError, match="has no data"):
        x.numpy()
    with pytest.raises(ValueError, match="meta tensors go to meta placements"):
        flow.zeros(3).to_global(placement=pm, sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match="meta tensors have no data"):
        x.to_global(placement=flow.placement("cpu", ranks=[0]), sbp=flow.sbp.broadcast)
    with pytest.raises(ValueError, match="placement and sbp"):
        flow.Tensor(2, placement=pm)
