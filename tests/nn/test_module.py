"""nn.Module bookkeeping: parameters/buffers/children, state_dict, hooks, modes, conversions,
repr and the module path in op errors."""
from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.ops.registry import OpError
from tests.helpers import torch


class Affine(nn.Module):
    """x @ w + b, written with core ops only."""

    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.w = nn.Parameter(flow.tensor(np.arange(n_in * n_out, dtype=np.float32)
                                          .reshape(n_in, n_out) / 10))
        self.b = nn.Parameter(flow.zeros(n_out))
        self.register_buffer("calls", flow.zeros(1))
        self.register_buffer("scratch", flow.zeros(2), persistent=False)

    def forward(self, x):
        return flow.matmul(x, self.w) + self.b


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Affine(3, 4)
        self.blocks = nn.ModuleList([Affine(4, 4), Affine(4, 4)])
        self.act = nn.ReLU()
        self.last = Affine(4, 2)

    def forward(self, x):
        x = self.first(x)
        for b in self.blocks:
            x = self.act(b(x))
        return self.last(x)


def test_parameter_is_leaf_sharing_storage():
    t = flow.ones(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, flow.Tensor) and p.is_leaf and p.requires_grad
    with flow.no_grad():
        t.mul_(3)
    np.testing.assert_array_equal(p.detach().numpy(), np.full((2, 3), 3.0))
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(flow.ones(2), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(flow.tensor([1, 2]))


def test_registration_order_and_names():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["first.w", "first.b", "blocks.0.w", "blocks.0.b", "blocks.1.w",
                     "blocks.1.b", "last.w", "last.b"]
    assert list(net._modules) == ["first", "blocks", "act", "last"]
    assert [n for n, _ in net.named_parameters(prefix="model", recurse=True)][0] == "model.first.w"
    assert list(net.first.named_parameters(recurse=False)) == list(net.first._parameters.items())
    assert [n for n, _ in net.named_buffers()] == [
        "first.calls", "first.scratch", "blocks.0.calls", "blocks.0.scratch", "blocks.1.calls",
        "blocks.1.scratch", "last.calls", "last.scratch"]
    assert [n for n, _ in net.named_children()] == ["first", "blocks", "act", "last"]
    assert [n for n, _ in net.named_modules()] == ["", "first", "blocks", "blocks.0",
                                                   "blocks.1", "act", "last"]
    assert len(list(net.parameters())) == 8 and len(list(net.buffers())) == 8
    assert net.get_submodule("blocks.1") is net.blocks[1]
    assert net.get_parameter("blocks.1.w") is net.blocks[1].w


def test_shared_parameter_listed_once():
    net = Net()
    net.last.w = net.first.w
    assert sum(1 for p in net.parameters() if p is net.first.w) == 1
    assert "last.w" in net.state_dict()


def test_setattr_rules():
    m = Affine(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'w'"):
        m.w = flow.ones(2, 2)
    m.w = None
    assert m.w is None and "w" in m._parameters
    m.calls = flow.ones(1)  # buffer reassignment keeps it a buffer
    assert "calls" in m._buffers
    with pytest.raises(TypeError, match="buffer"):
        m.calls = 3
    m.plain = 5
    assert m.plain == 5 and "plain" not in m._buffers
    m.sub = nn.ReLU()
    assert m._modules["sub"] is m.sub
    del m.sub
    assert "sub" not in m._modules
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        _ = m.missing
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", flow.ones(1))
    with pytest.raises(KeyError, match='contain "."'):
        m.register_parameter("a.b", None)

    class Early(nn.Module):
        def __init__(self):
            self.p = nn.Parameter(flow.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_state_dict_round_trip():
    a, b = Net(), Net()
    with flow.no_grad():
        for p in b.parameters():
            p.copy_(flow.zeros(tuple(p.shape)))
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd)[:3] == ["first.w", "first.b", "first.calls"]
    assert "first.scratch" not in sd  # non-persistent buffer
    # OneFlow's state dict holds the tensors themselves (PyTorch's detaches them)
    assert sd["first.w"] is a.first.w and sd["first.calls"] is a.first.calls
    assert isinstance(a.state_dict(keep_vars=True)["first.w"], nn.Parameter)
    w_before = b.first.w
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.first.w is w_before  # loaded in place
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[k].numpy(), v.numpy())
    # the entries are the parameters
    with flow.no_grad():
        a.first.w.mul_(0)
    np.testing.assert_array_equal(sd["first.w"].numpy(), 0)
    # numpy arrays are accepted as values
    b.load_state_dict({k: v.numpy() + 1 for k, v in a.state_dict().items()})
    np.testing.assert_allclose(b.first.b.detach().numpy(), 1.0)


def test_load_state_dict_strict_errors():
    net = Net()
    sd = net.state_dict()
    del sd["last.b"]
    sd["extra.weight"] = flow.ones(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    msg = str(err.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "last.b"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    res = net.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["last.b"] and res.unexpected_keys == ["extra.weight"]


def test_load_state_dict_shape_mismatch():
    net = Net()
    sd = net.state_dict()
    sd["blocks.0.w"] = flow.ones(3, 4)
    with pytest.raises(RuntimeError, match=r"size mismatch for blocks\.0\.w: copying a param with "
                                           r"shape \(3, 4\) from checkpoint, the shape in current "
                                           r"model is \(4, 4\)"):
        net.load_state_dict(sd, strict=False)


def test_forward_hooks_modify_input_and_output():
    m = Affine(2, 2)
    x = flow.ones(1, 2)
    seen = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h2 = m.register_forward_hook(lambda mod, args, out: seen.append(args[0].numpy().copy()))
    h3 = m.register_forward_hook(lambda mod, args, out: out + 100)
    base = flow.matmul(x, m.w).detach().numpy()
    y = m(x)
    np.testing.assert_allclose(y.detach().numpy(), 2 * base + 100, rtol=1e-6)
    np.testing.assert_array_equal(seen[0], np.full((1, 2), 2.0))
    for h in (h1, h2, h3):
        h.remove()
    np.testing.assert_allclose(m(x).detach().numpy(), base, rtol=1e-6)
    assert len(seen) == 1
    with m.register_forward_pre_hook(lambda mod, args: x * 0):
        np.testing.assert_array_equal(m(x).detach().numpy(), 0)
    assert not m._forward_pre_hooks
    order = []
    m.register_forward_hook(lambda *a: order.append("a"))
    m.register_forward_hook(lambda *a: order.append("b"), prepend=True)
    kw = m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 0,), kwargs),
                                      with_kwargs=True)
    np.testing.assert_array_equal(m(x).detach().numpy(), 0)
    assert order == ["b", "a"]
    kw.remove()
    assert not m._forward_pre_hooks_with_kwargs


def test_train_eval_propagates():
    net = Net()
    assert net.training and net.blocks[1].training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.blocks.train()
    assert net.blocks[0].training and not net.first.training
    with pytest.raises(ValueError):
        net.train("yes")


def test_to_float64_keeps_parameter_identity():
    net = Net()
    w = net.first.w
    x = flow.ones(1, 3)
    net(x).sum().backward()
    assert net.to(flow.float64) is net
    assert net.first.w is w and isinstance(w, nn.Parameter) and w.requires_grad
    assert w.dtype == flow.float64 and w.grad.dtype == flow.float64
    assert net.first.calls.dtype == flow.float64
    assert net.state_dict()["first.w"].dtype == flow.float64
    assert net(x.double()).dtype == flow.float64
    net.float()
    assert w.dtype == flow.float32
    net.to("cpu")
    with pytest.raises(RuntimeError, match="not available"):
        net.to("cuda")
    with pytest.raises(TypeError):
        net.to(flow.int64)


def test_zero_grad_and_requires_grad():
    net = Net()
    net(flow.ones(2, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_apply_and_instance_forward_override():
    net = Net()
    visited = []
    net.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Affine", "Affine", "Affine", "ModuleList", "ReLU", "Affine", "Net"]
    net.act.forward = lambda x: x * 0
    out = net(flow.ones(1, 3))
    np.testing.assert_allclose(out.detach().numpy(), net.last.b.detach().numpy()[None])

    class NoForward(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="NoForward"):
        NoForward()(1)


def test_op_error_names_module_path():
    net = Net()
    net.blocks[1].w = nn.Parameter(flow.ones(3, 4))
    with pytest.raises(OpError, match=r"in module Net\.blocks\.1\]"):
        net(flow.ones(2, 3))
    seq = nn.Sequential(OrderedDict(body=nn.Sequential(Affine(3, 3), Affine(4, 4))))
    with pytest.raises(OpError, match=r"in module Sequential\.body\.1\]"):
        seq(flow.ones(1, 3))


def test_deepcopy_module():
    net = Net()
    twin = copy.deepcopy(net)
    assert twin.first.w is not net.first.w
    np.testing.assert_array_equal(twin.first.w.detach().numpy(), net.first.w.detach().numpy())
    assert isinstance(twin.first.w, nn.Parameter)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_repr_matches_torch():
    def build(m):
        class Model(m.Module):
            def __init__(self):
                super().__init__()
                self.features = m.Sequential(m.Conv2d(3, 8, 3, padding=1), m.BatchNorm2d(8),
                                             m.ReLU(inplace=True), m.MaxPool2d(2))
                self.blocks = m.ModuleList([m.Linear(8, 8) for _ in range(3)] + [m.Tanh()])
                self.heads = m.ModuleDict({"cls": m.Linear(8, 10, bias=False),
                                           "drop": m.Dropout(0.2)})
                self.norm = m.LayerNorm(8)
                self.emb = m.Embedding(5, 8)
        return Model()

    assert repr(build(nn)) == repr(build(torch.nn))
    assert repr(nn.Sequential()) == repr(torch.nn.Sequential()) == "Sequential()"
