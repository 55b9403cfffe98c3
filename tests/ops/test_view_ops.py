"""Shape and view breadth (functional/views.py, ops/views.py): compared with PyTorch, gradients
by finite differences in float64."""
import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

rng = np.random.default_rng(0)


def _same(a, t):
    np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert tuple(a.shape) == tuple(t.shape)


@pytest.mark.parametrize("args", [(0, 0, 1), (1, 0, 1), (-1, 0, 1), (2, 2, 0), (-1, 1, 2),
                                  (5, 0, 2)])
def test_diagonal_matches_torch_and_is_a_view(args):
    a = rng.standard_normal((3, 4, 5))
    _same(flow.diagonal(flow.tensor(a), *args), torch.diagonal(torch.tensor(a), *args))
    x = flow.tensor(a)
    d = x.diagonal(*args)
    if d.numel():
        d.fill_(7.0)
        assert (x.numpy() == 7.0).sum() == d.numel()


def test_diagonal_grad():
    gradcheck(lambda x: flow.diagonal(x, 1, 2, 0), rng.standard_normal((3, 4, 5)))
    gradcheck(lambda x: flow.diagonal(x, -1), rng.standard_normal((4, 3)))


@pytest.mark.parametrize("shape,k", [((4,), 0), ((3,), 2), ((3,), -1), ((3, 5), 1),
                                     ((4, 3), -2), ((0,), 0), ((0, 3), 0)])
def test_diag_matches_torch(shape, k):
    a = rng.standard_normal(shape)
    _same(flow.diag(flow.tensor(a), k), torch.diag(torch.tensor(a), k))
    if 0 not in shape:
        gradcheck(lambda x: flow.diag(x, k), a)


@pytest.mark.parametrize("perm", [None, (2, 0, 1)])
@pytest.mark.parametrize("offset", [None, 0, 2])
def test_as_strided_matches_torch(perm, offset):
    a = rng.standard_normal((3, 4, 2))
    x, t = flow.tensor(a), torch.tensor(a)
    if perm:
        x, t = x.permute(*perm), t.permute(*perm)
    args = ((2, 2, 3), (1, 1, 2)) + (() if offset is None else (offset,))
    _same(flow.as_strided(x, *args), torch.as_strided(t, *args))

    def fn(v):
        return (v.permute(*perm) if perm else v).as_strided(*args)
    gradcheck(fn, a)  # overlapping reads: their gradients add up


def test_as_strided_out_of_storage_raises():
    with pytest.raises(Exception, match="as_strided"):
        flow.as_strided(flow.ones(2, 2), (3,), (2,), 1).numpy()


def test_storage_offset():
    x = flow.zeros(3, 4)
    assert x.storage_offset() == 0
    assert x[1].storage_offset() == 4
    assert x[:, 2:].storage_offset() == 2
    assert x.permute(1, 0).storage_offset() == 0


def test_stacks_and_atleast():
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    v, w = rng.standard_normal(3), rng.standard_normal(3)
    for name in ("hstack", "vstack", "row_stack", "dstack", "column_stack"):
        for args in ((a, b), (v, w)):
            _same(getattr(flow, name)([flow.tensor(x) for x in args]),
                  getattr(torch, name)([torch.tensor(x) for x in args]))
    s = np.array(2.0)
    for n in (1, 2, 3):
        fn, tfn = getattr(flow, f"atleast_{n}d"), getattr(torch, f"atleast_{n}d")
        for x in (s, v, a, rng.standard_normal((2, 1, 3, 1))):
            _same(fn(flow.tensor(x)), tfn(torch.tensor(x)))
        res = fn([flow.tensor(s), flow.tensor(v)])
        assert isinstance(res, tuple) and len(res) == 2
    gradcheck(lambda x, y: flow.dstack([x, y]), v, w)


@pytest.mark.parametrize("sec", [3, 4, (1, 3), [0, 2, 10], (-2,)])
def test_tensor_split_and_hsplit(sec):
    a = rng.standard_normal((2, 7, 3))
    got = flow.tensor_split(flow.tensor(a), sec, dim=1)
    want = torch.tensor_split(torch.tensor(a), sec, dim=1)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    a = rng.standard_normal((2, 6, 4))
    for name in ("hsplit", "vsplit", "dsplit"):
        for s in (2, (1, 3)):
            for g, w in zip(getattr(flow, name)(flow.tensor(a), s),
                            getattr(torch, name)(torch.tensor(a), s)):
                _same(g, w)
    with pytest.raises(Exception, match="hsplit"):
        flow.hsplit(flow.tensor(a), 4)


def test_select_meshgrid_broadcast_like():
    a = rng.standard_normal((3, 4, 5))
    for dim, i in ((0, 1), (2, -1), (-2, 3)):
        _same(flow.select(flow.tensor(a), dim, i), torch.select(torch.tensor(a), dim, i))
    with pytest.raises(IndexError, match="select"):
        flow.select(flow.tensor(a), 1, 4)
    gradcheck(lambda x: x.select(1, 2), a)
    u, v, w = rng.standard_normal(2), rng.standard_normal(3), rng.standard_normal(4)
    for indexing in ("ij", "xy"):
        for g, t in zip(flow.meshgrid(flow.tensor(u), flow.tensor(v), flow.tensor(w),
                                      indexing=indexing),
                        torch.meshgrid(torch.tensor(u), torch.tensor(v), torch.tensor(w),
                                       indexing=indexing)):
            _same(g, t)
    gradcheck(lambda x, y: flow.meshgrid(x, y), u, v)
    out = flow.broadcast_like(flow.ones(3, 1, 1), flow.ones(3, 3, 3), broadcast_axes=(1, 2))
    assert out.shape == (3, 3, 3)
    assert flow.broadcast_like(flow.ones(3), flow.ones(2, 4, 3), broadcast_axes=(0, 1)).shape \
        == (2, 4, 3)


def test_repeat_interleave():
    a = rng.standard_normal((2, 3))
    ta = torch.tensor(a)
    _same(flow.repeat_interleave(flow.tensor(a), 2), torch.repeat_interleave(ta, 2))
    _same(flow.tensor(a).repeat_interleave(3, dim=0), ta.repeat_interleave(3, dim=0))
    reps = [1, 0, 2]
    _same(flow.repeat_interleave(flow.tensor(a), flow.tensor(reps), 1),
          torch.repeat_interleave(ta, torch.tensor(reps), 1))
    _same(flow.repeat_interleave(flow.tensor([2, 1])),
          torch.repeat_interleave(torch.tensor([2, 1])))
    gradcheck(lambda x: flow.repeat_interleave(x, flow.tensor([1, 0, 2]), 1), a)


def test_slice_and_slice_update():
    a = rng.standard_normal((4, 5))
    out = flow.slice(flow.tensor(a), [[1, 4, 2], [0, 5, 3]])
    np.testing.assert_array_equal(out.numpy(), a[1:4:2, 0:5:3])
    x = flow.tensor(a)
    flow.slice_update(x, flow.tensor(np.ones((2, 5))), [[1, 3, 1]])
    want = a.copy()
    want[1:3] = 1
    np.testing.assert_array_equal(x.numpy(), want)
    y = flow.slice_update(flow.tensor(a), flow.zeros(2, 1), [0, 1], [4, 2], [2, 1], inplace=False)
    want = a.copy()
    want[0:4:2, 1:2] = 0
    np.testing.assert_array_equal(y.numpy(), want)


def test_inplace_squeeze_unsqueeze_contiguous():
    x = flow.ones(2, 1, 3)
    assert x.squeeze_(1) is x and x.shape == (2, 3)
    x.unsqueeze_(0)
    assert x.shape == (1, 2, 3)
    y = flow.ones(2, 3).t()
    y.contiguous_()
    assert y.is_contiguous() and y.shape == (3, 2)
    a = rng.standard_normal((2, 1, 3))

    def fn(v):
        w = v * 2
        w.squeeze_()
        return w
    gradcheck(fn, a)


def test_inplace_shape_change_is_seen_by_saved_tensors_and_storage_offsets():
    w = flow.ones(2, 1, 3, requires_grad=True)
    y = w * 2
    z = y * y  # saves y
    y.squeeze_()
    with pytest.raises(RuntimeError, match="in-place"):
        z.sum().backward()
    x, t = flow.zeros(3, 4), torch.zeros(3, 4)
    assert x[1].expand(2, 4).storage_offset() == t[1].expand(2, 4).storage_offset()
    assert x.diagonal(1).storage_offset() == t.diagonal(1).storage_offset()
