"""view_as_real / view_as_complex (copies here): values and gradients against PyTorch, a
non-contiguous last dim, errors, and eager and nn.Graph agreeing on a write into the result."""
import numpy as np
import pytest
import torch

import actorflow as flow
from actorflow.ops.registry import OpError

rng = np.random.default_rng(9)


def _z(shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def test_values_match_torch_and_are_copies():
    z = _z((2, 3))
    x, t = flow.tensor(z), torch.tensor(z)
    r, tr = flow.view_as_real(x), torch.view_as_real(t)
    assert r.dtype == flow.float64 and tuple(r.shape) == (2, 3, 2)
    np.testing.assert_array_equal(r.numpy(), tr.numpy())
    c = flow.view_as_complex(r)
    np.testing.assert_array_equal(c.numpy(), z)
    r[1, 2, 1] = 7.0  # a copy: x keeps its values (and so eager and nn.Graph agree)
    np.testing.assert_array_equal(x.numpy(), z)
    f = flow.view_as_real(flow.tensor(z.astype(np.complex64)))
    assert f.dtype == flow.float32


def test_gradients_match_torch():
    a, w = rng.standard_normal((4, 2)), _z(4)
    x, t = flow.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (flow.view_as_complex(x) * flow.tensor(w)).abs().sum().backward()
    (torch.view_as_complex(t) * torch.tensor(w)).abs().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    z, wr = _z((3,)), rng.standard_normal((3, 2))
    x, t = flow.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    (flow.view_as_real(x) ** 2 * flow.tensor(wr)).sum().backward()
    (torch.view_as_real(t) ** 2 * torch.tensor(wr)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_non_contiguous_last_dim_is_a_copy_and_bad_inputs_raise():
    a = rng.standard_normal((2, 3))
    x = flow.tensor(a).T  # (3, 2), last dim strided
    np.testing.assert_array_equal(flow.view_as_complex(x).numpy(), a[0] + 1j * a[1])
    with pytest.raises(OpError, match=r"view_as_complex.*size 2.*\(2, 3\)"):
        flow.view_as_complex(flow.tensor(a))
    with pytest.raises(OpError, match="view_as_complex.*float32 or float64"):
        flow.view_as_complex(flow.ones(3, 2, dtype=flow.int64))
    with pytest.raises(OpError, match="view_as_real.*complex"):
        flow.view_as_real(flow.ones(3))


def test_writing_the_result_in_a_graph_matches_eager():
    def f(x):
        y = x * 1.0
        r = flow.view_as_real(y)
        r[..., 1].mul_(3.0)
        return y + 0.0, r + 0.0

    class G(flow.nn.Graph):
        def build(self, x):
            return f(x)

    z = _z((2, 2))
    for (y, r), (ey, er) in [(G()(flow.tensor(z)), f(flow.tensor(z)))]:
        np.testing.assert_array_equal(y.numpy(), ey.numpy())
        np.testing.assert_array_equal(r.numpy(), er.numpy())
        np.testing.assert_array_equal(y.numpy(), z)
        np.testing.assert_array_equal(er.numpy()[..., 1], 3 * z.imag)
