"""flow.einsum against PyTorch (values and gradients), finite differences in float64, inside
nn.Graph (contracted by matmul ops), and its errors."""
import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

rng = np.random.default_rng(0)

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii", [(4, 4)]), ("ii->i", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]), ("i,j", [(3,), (4,)]), ("i,i->", [(3,), (3,)]),
    ("...ij->...ji", [(2, 3, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]), ("ij->", [(3, 4)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("ij,kl->ijkl", [(2, 3), (4, 5)]), ("ji", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ij,j->i", [(3, 4), (4,)]),
    ("ij,kj->i", [(3, 4), (1, 4)]), ("i,->i", [(3,), ()]), ("...,...->...", [(2, 1), (3,)]),
    ("ijj,jk->ik", [(2, 3, 3), (3, 4)]), ("ij...,jk...->ik...", [(3, 4, 2), (4, 5, 1)]),
    ("ab,ab->", [(3, 1), (3, 4)]), ("ab,cb->ac", [(3, 1), (2, 4)]),
    ("Ab, bC -> CA", [(2, 3), (3, 4)]), ("...ii->...i", [(2, 3, 3)]),
]


@pytest.mark.parametrize("equation,shapes", CASES)
def test_einsum_matches_torch(equation, shapes):
    arrays = [rng.standard_normal(s) for s in shapes]
    xs = [flow.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = torch.einsum(equation, *ts)
    got = flow.einsum(equation, *xs)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(want.shape))
    (got * flow.tensor(g)).sum().backward()
    (want * torch.tensor(g)).sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_einsum_float32_list_operands_and_finite_differences():
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    got = flow.einsum("bij,jk->bki", [flow.tensor(a), flow.tensor(b)])
    assert got.dtype == flow.float32
    np.testing.assert_allclose(got.numpy(), np.einsum("bij,jk->bki", a, b), rtol=1e-5)
    gradcheck(lambda x, y: flow.einsum("iij,jk->ik", x, y), rng.standard_normal((3, 3, 2)),
              rng.standard_normal((2, 4)))


def test_einsum_in_graph_is_matmul():
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)

    class G(flow.nn.Graph):
        def build(self, x, y):
            return flow.einsum("bij,bjk->bk", x, y)

    g = G()
    out = g(flow.tensor(a), flow.tensor(b))
    np.testing.assert_allclose(out.numpy(), np.einsum("bij,bjk->bk", a, b), rtol=1e-5)
    types = {o.op_type for o in g.forward_job.ops}
    assert "matmul" in types


@pytest.mark.timeout(60)
def test_einsum_errors():
    x = flow.ones(2, 3)
    with pytest.raises(ValueError, match="name 3 dims of an operand with 2"):
        flow.einsum("ijk", x)
    with pytest.raises(ValueError, match="2 operand terms for 1 operands"):
        flow.einsum("ij,jk", x)
    with pytest.raises(ValueError, match="label 'j' has sizes 3 and 4"):
        flow.einsum("ij,jk", x, flow.ones(4, 2))
    with pytest.raises(ValueError, match="output label 'z' appears in no operand"):
        flow.einsum("ij->z", x)
    with pytest.raises(ValueError, match="repeat a label"):
        flow.einsum("ij->ii", x)
    with pytest.raises(ValueError, match="invalid subscripts"):
        flow.einsum("i1", x)
    with pytest.raises(ValueError, match="repeated on dims of sizes 2 and 3"):
        flow.einsum("ii", x)
