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
