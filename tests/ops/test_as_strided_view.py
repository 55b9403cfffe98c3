"""as_strided as a view (eager: shares the input's memory, writes reach it, autograd through
writes into it) and Tensor.as_strided_, compared with PyTorch; a write through it in nn.Graph."""
import numpy as np
import pytest
import torch

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck

rng = np.random.default_rng(1)


def test_as_strided_shares_memory_and_writes_reach_the_base_as_in_torch():
    a = rng.standard_normal((3, 4))
    x, t = flow.tensor(a), torch.tensor(a)
    for args in (((2, 2), (4, 1), 1), ((3,), (5,), 0), ((2, 3), (1, 4), 0)):
        v, tv = x.as_strided(*args), t.as_strided(*args)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        assert v.stride() == tv.stride() and v.storage_offset() == tv.storage_offset()
        v.mul_(3.0)
        tv.mul_(3.0)
        np.testing.assert_array_equal(x.numpy(), t.numpy())
    # a view of a view: offsets are in the storage, as in PyTorch
    s, ts = x[1:], t[1:]
    np.testing.assert_array_equal(s.as_strided((2, 2), (1, 4), 5).numpy(),
                                  ts.as_strided((2, 2), (1, 4), 5).numpy())


def test_reading_storage_outside_the_input_is_an_error_at_the_call():
    x = flow.arange(12.0).reshape(3, 4)[1:]
    with pytest.raises(OpError,
                       match=r"as_strided.*outside the input.*\(2, 4\)"):
        x.as_strided((2,), (1,), 0)


def test_gradient_of_overlapping_views_and_through_a_write_into_the_view():
    gradcheck(lambda x: flow.as_strided(x, (3, 3), (1, 1), 1) * 2.0,
              rng.standard_normal((2, 4)))
    gradcheck(lambda x: flow.as_strided(x, (2, 3), (0, 2)), rng.standard_normal(7))
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((2, 2))
    x, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    w, tw = flow.tensor(b, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, ty = x * 1.0, t * 1.0
    y.as_strided((2, 2), (4, 1), 5).mul_(w)
    ty.as_strided((2, 2), (4, 1), 5).mul_(tw)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_as_strided_in_place_becomes_the_view():
    a = rng.standard_normal((2, 3))
    x, t = flow.tensor(a), torch.tensor(a)
    assert x.as_strided_((3, 2), (1, 3)) is x
    t.as_strided_((3, 2), (1, 3))
    assert tuple(x.shape) == (3, 2) and x.stride() == t.stride()
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    x.add_(1.0)
    t.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_write_through_as_strided_in_a_graph_matches_eager():
    def f(x):
        y = x * 1.0
        y.as_strided((2, 2), (4, 1), 1).mul_(10.0)
        return y + 0.0

    class G(flow.nn.Graph):
        def build(self, x):
            return f(x)

    a = rng.standard_normal((3, 4))
    np.testing.assert_array_equal(G()(flow.tensor(a)).numpy(), f(flow.tensor(a)).numpy())
    t = torch.tensor(a)
    t.as_strided((2, 2), (4, 1), 1).mul_(10.0)
    np.testing.assert_array_equal(f(flow.tensor(a)).numpy(), t.numpy())
