"""``x[mask] = value`` as a masked fill: against PyTorch, with gradients, and inside nn.Graph
(where the nonzero-based form of a bool index cannot run: its shape depends on the data)."""
import numpy as np
import pytest
import torch

import actorflow as flow

CASES = [((4, 3), (4,), 2.5), ((4, 3), (4, 3), -1.0), ((4, 3), (4,), [1.0, 2.0, 3.0]),
         ((2, 3, 2), (2, 3), [[7.0, 8.0]]), ((3, 2), (3, 2), [[[0.5]]])]


@pytest.mark.parametrize("shape,mshape,val", CASES)
def test_mask_setitem_values_and_grads(shape, mshape, val):
    rng = np.random.default_rng(0)
    a, m = rng.standard_normal(shape), rng.random(mshape) > 0.5
    x = flow.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    is_t = isinstance(val, list)
    v = flow.tensor(val, dtype=flow.float64, requires_grad=True) if is_t else val
    tv = torch.tensor(val, dtype=torch.float64, requires_grad=True) if is_t else val
    y, ty = x * 1.0, t * 1.0
    y[flow.tensor(m)] = v
    ty[torch.tensor(m)] = tv
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy())
    w = rng.standard_normal(shape)
    (y * flow.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())
    if is_t:
        np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


def test_mask_setitem_casts_to_the_tensor_dtype():
    x = flow.zeros(4, 3, dtype=flow.int32)
    x[flow.tensor([True, False, True, False])] = 6.6
    t = torch.zeros(4, 3, dtype=torch.int32)
    t[torch.tensor([True, False, True, False])] = 6.6
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_mask_setitem_with_a_row_per_true_element_still_works():
    x = flow.zeros(4, 2)
    x[flow.tensor([True, False, True, False])] = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(x.numpy(), [[1, 2], [0, 0], [3, 4], [0, 0]])


def test_mask_setitem_in_graph():
    mask = flow.tensor([True, False, True, True, False, False, False, True])

    class G(flow.nn.Graph):
        def build(self, x):
            x[mask] = 6.6
            return x

    out = G()(flow.arange(8.0))
    expect = np.arange(8.0, dtype=np.float32)
    expect[mask.numpy()] = 6.6
    np.testing.assert_allclose(out.numpy(), expect)


def test_mask_setitem_shape_mismatch_raises():
    x = flow.zeros(4, 3)
    with pytest.raises(IndexError, match="mask"):
        x[flow.tensor([True, False])] = 1.0
