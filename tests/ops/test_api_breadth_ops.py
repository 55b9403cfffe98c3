"""lerp / lerp_, frac / frac_, the flow-level in-place unary ops, in-place comparisons,
new_ones, scatter_nd, in_top_k, Tensor.nms, nn.SquareReLU: against PyTorch or NumPy, gradients
by finite differences in float64, and inside nn.Graph."""
import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

rng = np.random.default_rng(0)


@pytest.mark.parametrize("weight", ["tensor", 0.3, 0.8])
def test_lerp_matches_torch(weight):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    w = rng.uniform(-0.5, 1.5, (3, 1)) if weight == "tensor" else weight
    fw = flow.tensor(w, requires_grad=True) if weight == "tensor" else w
    tw = torch.tensor(w, requires_grad=True) if weight == "tensor" else w
    fa, fb = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    got = flow.lerp(fa, fb, fw)
    want = torch.lerp(ta, tb.expand(3, 4), tw)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=0, atol=1e-15)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(fa.grad.numpy(), ta.grad.numpy(), atol=1e-14)
    np.testing.assert_allclose(fb.grad.numpy(), tb.grad.numpy(), atol=1e-14)
    if weight == "tensor":
        np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), atol=1e-14)
        gradcheck(lambda x, y, z: flow.lerp(x, y, z), a, b, w)
    else:
        gradcheck(lambda x, y: x.lerp(y, weight), a, b)
    x = flow.tensor(a)
    assert x.lerp_(flow.tensor(b), fw.detach() if weight == "tensor" else w) is x
    np.testing.assert_allclose(x.numpy(), want.detach().numpy(), atol=1e-15)
    np.testing.assert_array_equal(flow.lerp(flow.tensor(a), flow.tensor(b), 1.0).numpy(),
                                  np.broadcast_to(b, (3, 4)))


def test_frac_and_inplace_unary_names():
    a = np.array([1.5, -2.25, 3.0, -0.75, 0.0])
    np.testing.assert_array_equal(flow.frac(flow.tensor(a)).numpy(),
                                  torch.frac(torch.tensor(a)).numpy())
    gradcheck(lambda x: flow.frac(x) * x, np.array([0.3, -1.7, 2.2]))
    for name in ("ceil", "floor", "round", "sin", "frac"):
        x = flow.tensor(a)
        assert getattr(flow, name + "_")(x) is x
        np.testing.assert_allclose(x.numpy(), getattr(torch, name)(torch.tensor(a)).numpy())
    x = flow.tensor(a)
    assert x.frac_() is x


@pytest.mark.parametrize("name", ["gt", "ge", "lt", "le", "eq", "ne"])
def test_inplace_comparisons_keep_the_dtype(name):
    a, b = rng.integers(0, 3, 6).astype(np.float32), rng.integers(0, 3, 6).astype(np.float32)
    for other in (flow.tensor(b), 1.0):
        x = flow.tensor(a)
        t = torch.tensor(a)
        assert getattr(x, name + "_")(other) is x
        getattr(t, name + "_")(torch.tensor(b) if isinstance(other, flow.Tensor) else other)
        assert x.dtype == flow.float32
        np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_new_ones():
    x = flow.zeros(2, 3, dtype=flow.float64)
    y = flow.new_ones(x)
    assert y.shape == (2, 3) and y.dtype == flow.float64 and float(y.sum()) == 6
    z = flow.new_ones(x, (4,), dtype=flow.int32)
    assert z.shape == (4,) and z.dtype == flow.int32
    assert flow.new_ones(x, 5).shape == (5,)


def test_scatter_nd_matches_numpy_and_grads():
    index = np.array([[0, 1], [2, 3], [0, 1]])
    upd = rng.standard_normal(3)
    got = flow.scatter_nd(flow.tensor(index), flow.tensor(upd), (3, 4))
    want = np.zeros((3, 4))
    np.add.at(want, tuple(index.T), upd)
    np.testing.assert_allclose(got.numpy(), want)
    slices = rng.standard_normal((2, 4))
    got = flow.scatter_nd(flow.tensor([[2], [0]]), flow.tensor(slices), [3, 4])
    np.testing.assert_allclose(got.numpy(), np.stack([slices[1], np.zeros(4), slices[0]]))
    gradcheck(lambda u: flow.scatter_nd(flow.tensor(index), u, (3, 4)), upd)


@pytest.mark.timeout(60)
def test_scatter_nd_errors():
    with pytest.raises(Exception, match="scatter_nd: updates must have shape \\(2,\\)"):
        flow.scatter_nd(flow.tensor([[0], [1]]), flow.ones(3), (4,))
    with pytest.raises(Exception, match="scatter_nd: an index is out of bounds"):
        flow.scatter_nd(flow.tensor([[5]]), flow.ones(1), (4,)).numpy()


def test_in_top_k_and_tensor_method():
    pred = np.array([[0.1, 0.3, 0.2, 0.3], [1, 2, 3, 0], [0.5, np.inf, 0, 0]], np.float32)
    targets = np.array([3, 3, 0])
    for k, want in ((1, [True, False, False]), (2, [True, False, False]),
                    (4, [True, True, False])):
        got = flow.in_top_k(flow.tensor(targets), flow.tensor(pred), k)
        assert got.dtype == flow.bool
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(
        flow.tensor([1, 7]).in_top_k(flow.tensor([[0., 1.], [1., 0.]]), 1).numpy(),
        [True, False])


def test_tensor_nms_and_square_relu():
    boxes = flow.tensor([[0., 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
    scores = flow.tensor([0.9, 0.8, 0.7])
    np.testing.assert_array_equal(boxes.nms(scores, 0.5).numpy(),
                                  flow.nms(boxes, scores, 0.5).numpy())
    a = rng.standard_normal(7)
    np.testing.assert_allclose(flow.nn.SquareReLU()(flow.tensor(a)).numpy(),
                               np.maximum(a, 0) ** 2)


def test_ops_in_graph_match_eager():
    a, b, w = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3))

    def fn(x, y, z):
        idx = flow.tensor([[0, 1], [2, 3]])
        return (flow.lerp(x, y, z), flow.lerp(x, y, 0.25), flow.frac(x * 3),
                flow.scatter_nd(idx, x[0, :2], (3, 4)),
                flow.in_top_k(flow.tensor([0, 1, 2]), z, 2))

    class G(flow.nn.Graph):
        def build(self, x, y, z):
            return fn(x, y, z)

    args = [flow.tensor(v) for v in (a, b, w)]
    for ours, ref in zip(G()(*args), fn(*args)):
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
