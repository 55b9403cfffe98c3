"""Tensor API breadth: deepcopy, ``in``, post-accumulation hooks, memory formats, from_torch,
Tensor.new, expand strides, cat skipping legacy empty tensors."""
import copy

import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck


def test_deepcopy_of_leaf_and_non_leaf():
    x = flow.ones(2, 3, requires_grad=True)
    c = copy.deepcopy(x)
    assert c.requires_grad and c.is_leaf
    y = x + 1
    d = copy.deepcopy(y)  # OneFlow: a leaf without grad (PyTorch refuses)
    assert d.is_leaf and not d.requires_grad
    d.add_(1)  # so in-place ops on it are allowed
    np.testing.assert_array_equal(d.numpy(), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 2.0))


def test_contains_and_is_local():
    x = flow.tensor([[1, 2, 3], [4, 5, 6]])
    assert 1 in x and 6 in x and 7 not in x
    assert flow.tensor([4]) in x
    assert x.is_local


def test_post_grad_accumulation_hook():
    x = flow.zeros(2, 3, requires_grad=True)
    x._register_post_grad_accumulation_hook(lambda g: g * 2 + 1)
    (x.sum() + (x * 2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 7.0))
    z = flow.zeros(2, requires_grad=True)
    def add_one(g):
        g.add_(1)
    z._register_post_grad_accumulation_hook(add_one)
    z.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [2.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (z * 2)._register_post_grad_accumulation_hook(lambda g: g)


def test_to_memory_format():
    a = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    x = flow.tensor(a).permute(0, 2, 1, 3)
    y = x.to(memory_format=flow.contiguous_format)
    t = torch.tensor(a).permute(0, 2, 1, 3).contiguous()
    assert y.is_contiguous() and y.stride() == t.stride()
    np.testing.assert_array_equal(y.numpy(), t.numpy())
    c = flow.tensor(a).to(memory_format=flow.channels_last)
    tc = torch.tensor(a).to(memory_format=torch.channels_last).permute(0, 2, 3, 1)
    assert c.shape == tc.shape and c.stride() == tc.stride()
    np.testing.assert_array_equal(c.numpy(), tc.numpy())
    assert flow.tensor(a).to(memory_format=flow.preserve_format).shape == (2, 3, 4, 5)
    one = flow.ones(2, 1, 2, 4).to(memory_format=flow.channels_last)  # C == 1: still NHWC strides
    assert one.stride() == torch.ones(2, 1, 2, 4).to(
        memory_format=torch.channels_last).permute(0, 2, 3, 1).stride()
    assert flow.tensor(a).to(flow.float32, memory_format=flow.contiguous_format).dtype \
        is flow.float32
    with pytest.raises(RuntimeError, match="4-D"):
        flow.ones(2, 3).to(memory_format=flow.channels_last)


def test_from_torch_shares_memory():
    t = torch.rand(3, 2)
    f = flow.utils.tensor.from_torch(t)
    assert f.dtype is flow.float32
    t[0, 0] = 5.0
    assert f.numpy()[0, 0] == 5.0
    assert flow.utils.tensor.from_torch(torch.tensor(3)).shape == ()
    with pytest.raises(TypeError, match="from_torch"):
        flow.utils.tensor.from_torch(np.ones(2))


def test_tensor_new():
    x = flow.zeros(2, dtype=flow.int32)
    tx = torch.zeros(2, dtype=torch.int32)
    for args in ((), (2, 3), ([1, 2, 3],), (np.ones((2, 2)),)):
        got, want = x.new(*args), tx.new(*args)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype is flow.int32
    assert x.new(flow.Size([4])).shape == (4,)
    same = flow.ones(3, dtype=flow.int32)
    assert x.new(same).tolist() == [1, 1, 1]
    with pytest.raises(TypeError, match="new"):
        x.new(flow.ones(3))


@pytest.mark.parametrize("shape,target", [((2, 1, 3), (2, 4, 3)), ((1, 3), (2, 2, 3)),
                                          ((3,), (1, 3)), ((3, 1), (1, 3, 1)), ((), (2, 1)),
                                          ((), (1,)), ((1, 1), (2, 1))])
def test_expand_strides_match_torch(shape, target):
    a = np.random.default_rng(1).standard_normal(shape)
    y, t = flow.tensor(a).expand(*target), torch.tensor(a).expand(*target)
    assert y.stride() == t.stride()
    np.testing.assert_array_equal(y.numpy(), t.numpy())
    p = flow.tensor(np.ones((2, 1, 3))).permute(0, 2, 1).expand(2, 2, 3, 4)
    q = torch.ones(2, 1, 3, dtype=torch.float64).permute(0, 2, 1).expand(2, 2, 3, 4)
    assert p.stride() == q.stride()


def test_cat_skips_legacy_empty_tensors():
    a = np.random.default_rng(2).standard_normal((2, 3))
    out = flow.cat([flow.tensor(a), flow.zeros(0, dtype=flow.float64), flow.tensor(a)], dim=1)
    want = torch.cat([torch.tensor(a), torch.zeros(0, dtype=torch.float64), torch.tensor(a)],
                     dim=1)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    assert flow.cat([flow.zeros(0), flow.zeros(0)]).shape == (0,)
    gradcheck(lambda x: flow.cat([flow.zeros(0, dtype=flow.float64), x], 0), a)
