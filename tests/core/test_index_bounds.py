"""Out-of-range and negative indices behave as in PyTorch for every index-taking op: tensor
indexing (``x[t]``, ``x[t] = v``), ``take`` and ``narrow`` wrap negative indices; index_select,
gather, scatter(_add), index_add, embedding, one_hot and the class-index losses raise for them
(an error naming the op and the index), in eager mode and inside an nn.Graph."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn.functional as AF
from tests.helpers import FnGraph, gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
X = np.arange(12.0).reshape(3, 4)


def _lib_fns(lib):
    return torch.nn.functional if lib is torch else AF


# name -> (the op named in the error, op(lib, i) using the index value i)
REJECT_NEGATIVE = {
    "index_select": ("index_select", lambda lib, i: lib.index_select(lib.tensor(X), 0,
                                                                     lib.tensor([0, i]))),
    "index_select_dim1": ("index_select", lambda lib, i: lib.tensor(X).index_select(
        1, lib.tensor([i, 0]))),
    "gather": ("gather", lambda lib, i: lib.gather(lib.tensor(X), 0, lib.tensor([[0, i, 0, 0]]))),
    "scatter": ("scatter", lambda lib, i: lib.zeros(3, 4).scatter(0, lib.tensor([[0, i, 0, 0]]),
                                                                  lib.ones(1, 4))),
    "scatter_value": ("scatter", lambda lib, i: lib.zeros(3, 4).scatter(
        0, lib.tensor([[i, 0, 0, 0]]), 2.0)),
    "scatter_add_": ("scatter", lambda lib, i: lib.zeros(3, 4).scatter_add_(
        1, lib.tensor([[i]]), lib.ones(1, 1))),
    "index_add": ("index_add", lambda lib, i: lib.zeros(3, 4).index_add(0, lib.tensor([i]),
                                                                        lib.ones(1, 4))),
    "index_add_": ("index_add", lambda lib, i: lib.zeros(3, 4).index_add_(
        1, lib.tensor([0, i]), lib.ones(3, 2))),
    "embedding": ("embedding", lambda lib, i: _lib_fns(lib).embedding(lib.tensor([0, i]),
                                                                      lib.tensor(X))),
    "one_hot": ("one_hot", lambda lib, i: _lib_fns(lib).one_hot(lib.tensor([0, i]), 3)),
    "nll_loss": ("nll_loss", lambda lib, i: _lib_fns(lib).nll_loss(lib.tensor(X),
                                                                   lib.tensor([0, i, 1]))),
    "cross_entropy": ("cross_entropy", lambda lib, i: _lib_fns(lib).cross_entropy(
        lib.tensor(X), lib.tensor([0, 1, i]))),
}
WRAP_NEGATIVE = {
    "getitem_tensor": lambda lib, i: lib.tensor(X)[lib.tensor([0, i])],
    "getitem_list": lambda lib, i: lib.tensor(X)[[i, 0]],
    "getitem_two_tensors": lambda lib, i: lib.tensor(X)[lib.tensor([0, 1]), lib.tensor([i, i])],
    "getitem_int": lambda lib, i: lib.tensor(X)[i],
    "getitem_0d_tensor": lambda lib, i: lib.tensor(X)[:, lib.tensor(i)],
    "setitem_tensor": lambda lib, i: _set(lib.tensor(X), lib.tensor([i]), 100.0),
    "setitem_int": lambda lib, i: _set(lib.tensor(X), (slice(None), i), 100.0),
    "take": lambda lib, i: lib.take(lib.tensor(X), lib.tensor([[i, 0], [i * 4, 1]])),
    "narrow": lambda lib, i: lib.tensor(X).narrow(0, i, 1),
}


def _set(x, index, value):
    x[index] = value
    return x


def _run(fn, lib, i):
    out = fn(lib, i)
    return out.numpy()  # a sync point: kernel errors surface here in async mode


@needs_torch
@pytest.mark.parametrize("name", sorted(REJECT_NEGATIVE))
@pytest.mark.parametrize("i", [-1, -3, 5])
def test_ops_reject_negative_and_out_of_range_indices_as_pytorch(name, i):
    op, fn = REJECT_NEGATIVE[name]
    with pytest.raises((IndexError, RuntimeError)):
        _run(fn, torch, i)
    with pytest.raises((IndexError, RuntimeError), match=rf"{op}: .*{i}"):
        _run(fn, flow, i)
    np.testing.assert_allclose(_run(fn, flow, 1), _run(fn, torch, 1))  # in range: the same


@needs_torch
@pytest.mark.parametrize("name", sorted(WRAP_NEGATIVE))
def test_tensor_indexing_take_and_narrow_wrap_negative_indices_as_pytorch(name):
    fn = WRAP_NEGATIVE[name]
    for i in (-1, -2, -3):
        np.testing.assert_array_equal(_run(fn, flow, i), _run(fn, torch, i), err_msg=str(i))
    for i in (-5, 5):  # past the size either way: both raise
        with pytest.raises((IndexError, RuntimeError)):
            _run(fn, torch, i)
        with pytest.raises((IndexError, RuntimeError)):
            _run(fn, flow, i)


def test_index_select_issue_reproducer_names_op_index_and_size():
    x = flow.tensor(X)
    with pytest.raises(IndexError, match=r"index_select: index -1 is out of range for "
                                         r"dimension with size 3 \(dimension 0"):
        flow.index_select(x, 0, flow.tensor([0, -1]))
    with pytest.raises(IndexError, match=r"index_select: index -4 .* size 4 \(dimension 1"):
        x.index_select(-1, flow.tensor([-4]))
    with pytest.raises(IndexError, match=r"narrow: start -4 is out of range .* size 3"):
        x.narrow(0, -4, 1)


def test_index_select_values_and_gradients():
    x = np.random.default_rng(0).standard_normal((4, 5))
    idx = flow.tensor([3, 0, 3, 1])  # repeated rows accumulate in the gradient
    got = flow.tensor(x).index_select(1, flow.tensor([4, 0]))
    np.testing.assert_array_equal(got.numpy(), x[:, [4, 0]])
    np.testing.assert_array_equal(flow.tensor(x).index_select(0, flow.tensor(2)).numpy(),
                                  x[[2]])
    gradcheck(lambda t: t.index_select(0, idx), x)
    gradcheck(lambda t: t.index_select(1, flow.tensor([4, 4, 2])) ** 2, x)
    # double backward: the gradient (an index_add) is differentiable again
    t = flow.tensor(x, requires_grad=True)
    (g,) = flow.autograd.grad((t.index_select(0, idx) ** 2).sum(), t, create_graph=True)
    g.sum().backward()
    want = 2 * np.bincount([3, 0, 3, 1], minlength=4)[:, None] * np.ones((4, 5))
    np.testing.assert_allclose(t.grad.numpy(), want)


@pytest.mark.timeout(60)
def test_inside_graph_negative_indices_raise_or_wrap_like_eager():
    x = flow.tensor(X)
    select = FnGraph(lambda t, i: t.index_select(0, i))
    np.testing.assert_array_equal(select(x, flow.tensor([2, 0])).numpy(), X[[2, 0]])
    with pytest.raises(RuntimeError, match=r"index_select: index -1 is out of range"):
        select(x, flow.tensor([0, -1])).numpy()
    np.testing.assert_array_equal(select(x, flow.tensor([1, 1])).numpy(), X[[1, 1]])
    gather = FnGraph(lambda t, i: t.gather(1, i))
    with pytest.raises(RuntimeError, match=r"gather: index -2 is out of range"):
        gather(x, flow.tensor([[0], [-2], [1]])).numpy()
    index = FnGraph(lambda t, i: (t[i], t.take(i)))
    rows, flat = index(x, flow.tensor([-1, 0, -3]))
    np.testing.assert_array_equal(rows.numpy(), X[[-1, 0, -3]])
    np.testing.assert_array_equal(flat.numpy(), X.ravel()[[-1, 0, -3]])
