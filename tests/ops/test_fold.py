"""nn.Unfold / nn.Fold (ops im2col / col2im) and Tensor.unfold, compared with PyTorch;
gradients by finite differences in float64."""
import typing

import numpy as np
import pytest
import torch

import actorflow as flow
from tests.helpers import gradcheck

rng = np.random.default_rng(0)
GEOMETRIES = [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=2, padding=1, stride=(2, 1)),
              dict(kernel_size=3, padding=(0, 2), stride=3)]


@pytest.mark.parametrize("kw", GEOMETRIES)
def test_unfold_and_fold_match_torch(kw):
    a = rng.standard_normal((2, 3, 7, 6))
    got = flow.nn.Unfold(**kw)(flow.tensor(a))
    want = torch.nn.Unfold(**kw)(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy())
    back = flow.nn.Fold((7, 6), **kw)(got)
    np.testing.assert_allclose(back.numpy(), torch.nn.Fold((7, 6), **kw)(want).numpy())
    unbatched = flow.nn.functional.unfold(flow.tensor(a[0]), **kw)
    np.testing.assert_allclose(unbatched.numpy(), want.numpy()[0])


@pytest.mark.parametrize("kw", GEOMETRIES[1:])
def test_unfold_fold_grads(kw):
    a = rng.standard_normal((1, 2, 5, 5))
    gradcheck(lambda x: flow.nn.functional.unfold(x, **kw), a)
    cols = flow.nn.functional.unfold(flow.tensor(a), **kw).numpy()
    gradcheck(lambda c: flow.nn.functional.fold(c, (5, 5), **kw), cols)


def test_unfold_errors():
    with pytest.raises(Exception, match="im2col"):
        flow.nn.functional.unfold(flow.ones(1, 1, 2, 2), kernel_size=3)
    with pytest.raises(Exception, match="col2im"):
        flow.nn.functional.fold(flow.ones(1, 5, 4), (3, 3), kernel_size=2)


@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (0, 1, 1), (-1, 2, 1), (1, 8, 5)])
def test_tensor_unfold_matches_torch(dim, size, step):
    a = rng.standard_normal((3, 8, 2))
    got = flow.tensor(a).unfold(dim, size, step)
    np.testing.assert_array_equal(got.numpy(), torch.tensor(a).unfold(dim, size, step).numpy())
    gradcheck(lambda x: x.unfold(dim, size, step), a)
    assert flow.tensor(3.0).unfold(0, 1, 1).shape == (1,)


def test_skip_init_and_common_types():
    lin = flow.nn.utils.skip_init(flow.nn.Linear, 4, 3)
    assert lin.weight.shape == (3, 4) and lin.weight.requires_grad
    from actorflow.nn.common_types import _size_2_t
    assert typing.get_args(_size_2_t) == (int, typing.Tuple[int, int])
