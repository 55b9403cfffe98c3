"""Indexing ops: getitem / setitem, gather, scatter, index_select, index_add, masked_select,
masked_scatter, take, gather_nd, nonzero, argwhere."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actorflow as flow
from tests.helpers import gradcheck

rng = np.random.default_rng(0)


def _arr(*shape):
    return rng.standard_normal(shape)


def _t(a):
    return flow.tensor(a)


# ---- getitem forward vs NumPy -----------------------------------------------------------------

A = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)

BASIC = [
    1, -1, (0, 2), (1, -2, 3), slice(1, None), slice(None, None, 2), (slice(-3, -1), 1),
    (Ellipsis, 2), (0, Ellipsis, 1), (None,), (slice(None), None, 1), (Ellipsis, None),
    (1, 2, 3, 4), (Ellipsis,), (slice(0, 0),), (slice(5, 1),), (slice(1, 100, 3),),
    (None, 1, None, slice(None, None, 2), Ellipsis, -1),
]

ADVANCED = [
    [0, 1, 1], ([0, 1], [2, 0]), (slice(None), [2, 0, 2]), (Ellipsis, [4, 0]),
    (slice(None), [[0, 1], [2, 2]], slice(1, 3)), ([[0], [1]], [0, 2]),
    (slice(None), [0, 2], slice(None), [1, 3]),  # not adjacent: broadcast dims go first
    ([1, 0], slice(None), [2]), (None, [1, 0]), ([-1, -2], Ellipsis, [-1]),
    (np.array([1, 0]),), (slice(None), np.array([[1], [2]]), np.array([3, 0])),
]


@pytest.mark.parametrize("index", BASIC, ids=repr)
def test_basic_index_matches_numpy(index):
    x = _t(A)
    np.testing.assert_array_equal(x[index].numpy(), A[index])


@pytest.mark.parametrize("index", ADVANCED, ids=repr)
def test_advanced_index_matches_numpy(index):
    x = _t(A)
    np.testing.assert_array_equal(x[index].numpy(), A[index])


def test_index_tensors_and_zero_dim_tensor_index():
    x = _t(A)
    i = flow.tensor([1, 0, 1])
    j = flow.tensor([[2], [0]], dtype=flow.int32)
    np.testing.assert_array_equal(x[i].numpy(), A[[1, 0, 1]])
    np.testing.assert_array_equal(x[:, j].numpy(), A[:, np.array([[2], [0]])])
    np.testing.assert_array_equal(x[i, :, j].numpy(), A[[1, 0, 1], :, np.array([[2], [0]])])
    zero_d = flow.tensor(1)
    np.testing.assert_array_equal(x[zero_d, zero_d].numpy(), A[1, 1])
    assert x[zero_d]._base is x  # a 0-dim integer tensor indexes like an int: still a view


def test_bool_mask_indexing():
    x = _t(A)
    m1 = A[:, 0, 0, 0] > 50
    m2 = A[0, :, :, 0] % 3 == 0
    np.testing.assert_array_equal(x[flow.tensor(m1)].numpy(), A[m1])
    np.testing.assert_array_equal(x[1, flow.tensor(m2)].numpy(), A[1, m2])
    np.testing.assert_array_equal(x[:, flow.tensor(m2), 1:3].numpy(), A[:, m2, 1:3])
    np.testing.assert_array_equal(x[m1].numpy(), A[m1])  # NumPy bool arrays
    full = A > 60
    np.testing.assert_array_equal(x[flow.tensor(full)].numpy(), A[full])
    u8 = flow.tensor([1, 0], dtype=flow.uint8)  # uint8 tensors are masks, as in PyTorch
    np.testing.assert_array_equal(x[u8].numpy(), A[[True, False]])
    np.testing.assert_array_equal(x[[True, False]].numpy(), A[[True, False]])


def test_python_bool_and_empty_indices():
    x = _t(A)
    assert tuple(x[True].shape) == (1, 2, 3, 4, 5)
    assert tuple(x[False].shape) == (0, 2, 3, 4, 5)
    assert tuple(x[flow.tensor(False)].shape) == (0, 2, 3, 4, 5)
    assert tuple(x[[]].shape) == (0, 3, 4, 5)
    assert tuple(x[flow.tensor([], dtype=flow.int64)].shape) == (0, 3, 4, 5)
    e = flow.zeros(10, 0)
    assert tuple(e[[], [2]].shape) == (0,)  # selects nothing: no bounds to check
    assert tuple(e[[[[]]]].shape) == (1, 0, 0)


def test_list_of_sequences_is_a_tuple():
    x = _t(A[0, 0])
    np.testing.assert_array_equal(x[[[0, 1], [2, 3]]].numpy(), A[0, 0][[0, 1], [2, 3]])
    np.testing.assert_array_equal(x[[0, 2]].numpy(), A[0, 0][[0, 2]])


def test_int_with_index_tensors_follows_pytorch():
    torch = pytest.importorskip("torch")
    a = np.arange(60.0).reshape(3, 4, 5)
    x, t = _t(a), torch.tensor(a)
    cases = [(0, slice(None), [1, 2]), ([0, 1], 0, [1, 2]), (slice(None), [0, 1], None, [1, 2]),
             ([0, 2], True), (1, [[0], [2]], slice(1, 4))]
    for index in cases:
        np.testing.assert_array_equal(x[index].numpy(), t[index].numpy(), err_msg=repr(index))


def test_zero_dim_tensor_indexing():
    s = flow.tensor(3.5)
    assert s[...].item() == 3.5
    assert tuple(s[None].shape) == (1,)
    with pytest.raises(IndexError):
        s[0]


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_random_basic_slicing_matches_numpy(data):
    shape = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=4))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    items = []
    for n in shape:
        kind = data.draw(st.sampled_from(["int", "slice", "none", "skip"]))
        if kind == "int" and n > 0:
            items.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-7, 7))
            items.append(slice(data.draw(bound), data.draw(bound),
                               data.draw(st.one_of(st.none(), st.integers(1, 4)))))
        elif kind == "none":
            items.extend([None, slice(None)])
        else:
            items.append(slice(None))
    if data.draw(st.booleans()):
        items.insert(data.draw(st.integers(0, len(items))), Ellipsis)
    index = tuple(items)
    got = flow.tensor(a)[index]
    assert tuple(got.shape) == a[index].shape
    np.testing.assert_array_equal(got.numpy(), a[index])


# ---- view semantics ---------------------------------------------------------------------------

def test_basic_indexing_is_a_view_and_advanced_a_copy():
    x = flow.tensor(np.arange(12.0).reshape(3, 4))
    v = x[1:, ::2]
    assert v._base is x
    v[0, 1] = 100.0
    assert x[1, 2].item() == 100.0
    assert x._version == v._version
    x[0, 0] = -1.0
    assert x[0][0].item() == -1.0
    c = x[[0, 1]]
    assert c._base is None
    c[0, 0] = 7.0
    assert x[0, 0].item() == -1.0
    x[1:2, [1, 2]] = 0.0
    np.testing.assert_array_equal(x.numpy()[1, 1:3], [0.0, 0.0])


# ---- setitem forward --------------------------------------------------------------------------

@pytest.mark.parametrize("index", BASIC[:12] + ADVANCED, ids=repr)
def test_setitem_matches_numpy(index):
    x, ref = _t(A.copy()), A.copy()
    x[index] = -5.0
    ref[index] = -5.0
    np.testing.assert_array_equal(x.numpy(), ref)
    x, ref = _t(A.copy()), A.copy()
    shape = ref[index].shape
    val = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) + 0.5
    x[index] = flow.tensor(val)
    ref[index] = val
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_broadcast_cast_and_masks():
    x = flow.zeros(3, 4, dtype=flow.int64)
    x[1] = flow.tensor([1.7, 2.2, 3.9, 4.0])  # cast to int64
    np.testing.assert_array_equal(x.numpy()[1], [1, 2, 3, 4])
    x[:, 1:3] = flow.tensor([[9], [8], [7]])  # broadcast
    np.testing.assert_array_equal(x.numpy()[:, 1:3], [[9, 9], [8, 8], [7, 7]])
    x[0, 0] = flow.ones(1)  # leading size-1 dims of the value are dropped
    assert x[0, 0].item() == 1
    y = flow.tensor(np.arange(6.0).reshape(2, 3))
    y[y > 2] = 0.0
    np.testing.assert_array_equal(y.numpy(), [[0, 1, 2], [0, 0, 0]])
    y[flow.zeros(2, 3).to(flow.bool)] = 5.0  # empty mask: no change
    y[flow.tensor([], dtype=flow.int64)] = 5.0
    np.testing.assert_array_equal(y.numpy(), [[0, 1, 2], [0, 0, 0]])
    y[...] = 2.0
    assert float(y.numpy().sum()) == 12.0


# ---- gradients --------------------------------------------------------------------------------

def test_grad_getitem_basic():
    gradcheck(lambda x: x[1:, None, ::2, -1], _arr(3, 4, 2))
    gradcheck(lambda x: x[..., 1], _arr(2, 3))


def test_grad_getitem_advanced_with_duplicates():
    gradcheck(lambda x: x[[0, 2, 0, 0]], _arr(3, 2))
    gradcheck(lambda x: x[:, [[1, 1], [0, 1]], [2, 2]], _arr(2, 2, 3))
    mask = flow.tensor(np.array([[True, False, True], [False, False, True]]))
    gradcheck(lambda x: x[mask], _arr(2, 3))


def test_grad_getitem_backward_op():
    spec = (("slice", None, None, None), ("tensor", 0))
    idx = flow.tensor([1, 1, 0])
    gradcheck(lambda d: flow.getitem_backward(d, spec, (idx,), (2, 2)), _arr(2, 3))


def _set(index):
    def fn(x, v):
        y = x.clone()
        y[index] = v
        return y
    return fn


@pytest.mark.parametrize("index", [(1, slice(None)), (slice(None), [2, 0]), (Ellipsis, 0)],
                         ids=repr)
def test_grad_setitem_wrt_x_and_value(index):
    shape = A[0, 0][index].shape
    gradcheck(_set(index), _arr(4, 5), _arr(*shape))
    gradcheck(_set(index), _arr(4, 5), _arr(*shape[1:]) if shape else _arr())  # broadcast


def test_setitem_twice_then_backward():
    x = flow.tensor(_arr(3), requires_grad=True)
    a = flow.tensor(2.0, requires_grad=True)
    y = x * 1.0
    y[0] = a
    y[1] = a * 3.0
    (y * flow.tensor([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 100.0])
    assert a.grad.item() == pytest.approx(31.0)


def test_setitem_into_leaf_requiring_grad():
    x = flow.tensor(_arr(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[0] = 1.0
    with flow.no_grad():
        x[0] = 1.0
    assert x[0].item() == 1.0


def test_grad_gather_scatter_family():
    index = flow.tensor([[0, 2, 2], [1, 0, 0]])
    gradcheck(lambda x: flow.gather(x, 1, index), _arr(2, 4))
    gradcheck(lambda x: x.gather(0, flow.tensor([[1, 0], [1, 1]])), _arr(2, 3))
    perm = flow.tensor([[2, 0, 1], [0, 1, 2]])  # no duplicates along dim 1: scatter is smooth
    gradcheck(lambda x, s: flow.scatter(x, 1, perm, s), _arr(2, 4), _arr(2, 3))
    gradcheck(lambda x, s: flow.scatter(x, 1, perm[:, :2], s), _arr(2, 4), _arr(3, 3))
    gradcheck(lambda x: flow.scatter(x, 0, flow.tensor([[1, 0]]), 2.5), _arr(2, 2))
    gradcheck(lambda x, s: flow.scatter_add(x, 1, index, s), _arr(2, 4), _arr(2, 3))
    gradcheck(lambda x: flow.index_select(x, 1, flow.tensor([3, 0, 3])), _arr(2, 4))
    gradcheck(lambda x, s: flow.index_add(x, 0, flow.tensor([1, 1]), s, alpha=2.0),
              _arr(3, 2), _arr(2, 2))
    gradcheck(lambda x: flow.take(x, flow.tensor([[5, 0], [5, 1]])), _arr(2, 3))


def test_grad_masked_select_gather_nd_masked_scatter():
    mask = flow.tensor(np.array([[True, False, True], [False, True, True]]))
    gradcheck(lambda x: flow.masked_select(x, mask), _arr(1, 3))  # x broadcast to the mask
    gradcheck(lambda x: flow.gather_nd(x, flow.tensor([[0, 2], [1, 1], [0, 2]])), _arr(2, 3))
    gradcheck(lambda x: flow.gather_nd(x, flow.tensor([[1], [0], [1]])), _arr(2, 3))
    gradcheck(lambda x, s: flow.masked_scatter(x, mask, s), _arr(2, 3), _arr(5))


def test_inplace_scatter_and_index_add_grads():
    def fn(x, s):
        y = x * 1.0
        y.scatter_(0, flow.tensor([[1, 0, 1]]), s)
        y.scatter_add_(1, flow.tensor([[0, 0], [2, 2]]), s[:, :2] * 1.0)
        y.index_add_(1, flow.tensor([2, 2, 0]), s)
        return y
    gradcheck(fn, _arr(2, 3), _arr(2, 3))


# ---- gather / scatter / select forward --------------------------------------------------------

def test_gather_scatter_forward_numpy():
    x = _arr(3, 4)
    idx = np.array([[0, 3], [2, 2], [1, 0]])
    np.testing.assert_array_equal(flow.gather(_t(x), 1, _t(idx)).numpy(),
                                  np.take_along_axis(x, idx, 1))
    out = flow.scatter(_t(np.zeros((3, 4))), 1, _t(idx[:, :1]), _t(x[:, :1]))
    ref = np.zeros((3, 4))
    np.put_along_axis(ref, idx[:, :1], x[:, :1], 1)
    np.testing.assert_array_equal(out.numpy(), ref)
    added = flow.zeros(3, 4, dtype=flow.float64).scatter_add(1, _t(idx), _t(np.ones((3, 2))))
    np.testing.assert_array_equal(added.numpy()[1], [0, 0, 2, 0])
    filled = flow.zeros(2, 2).scatter(0, flow.tensor([[1, 0]]), value=3.0)
    np.testing.assert_array_equal(filled.numpy(), [[0, 3], [3, 0]])
    y = flow.zeros(2, 3)
    assert y.scatter_(1, flow.tensor([[2], [0]]), 1.0) is y
    np.testing.assert_array_equal(y.numpy(), [[0, 0, 1], [1, 0, 0]])


def test_index_select_take_index_add_forward():
    x = _arr(3, 4)
    np.testing.assert_array_equal(flow.index_select(_t(x), 1, flow.tensor([3, 3, 0])).numpy(),
                                  x[:, [3, 3, 0]])
    np.testing.assert_array_equal(_t(x).index_select(0, flow.tensor(2)).numpy(), x[[2]])
    np.testing.assert_array_equal(flow.take(_t(x), flow.tensor([[11, 0], [-1, 4]])).numpy(),
                                  np.take(x, [[11, 0], [-1, 4]]))
    out = flow.index_add(_t(np.zeros((3, 2))), 0, flow.tensor([2, 2, 0]), _t(np.ones((3, 2))),
                         alpha=0.5)
    np.testing.assert_array_equal(out.numpy(), [[0.5, 0.5], [0, 0], [1, 1]])


def test_masked_select_broadcast_and_dtypes():
    x = np.array([[[-0.5, 0.3], [0.4, -0.7], [0.05, -0.2]]])
    mask = np.array([[[1, 0], [1, 1], [0, 1]], [[1, 1], [0, 1], [1, 1]]], dtype=np.int8)
    got = flow.masked_select(_t(x), flow.tensor(mask))
    np.testing.assert_array_equal(got.numpy(), np.broadcast_to(x, mask.shape)[mask != 0])
    ints = flow.tensor([[3, 1, 4]])
    np.testing.assert_array_equal(ints.masked_select(flow.tensor([True, False, True])).numpy(),
                                  [3, 4])
    assert tuple(flow.masked_select(flow.tensor(2.0), flow.tensor(True)).shape) == (1,)


def test_gather_nd_forward():
    p = np.arange(24.0).reshape(2, 3, 4)
    ind = np.array([[[0, 2], [1, 1]], [[1, 0], [0, 0]]])
    got = flow.gather_nd(_t(p), _t(ind)).numpy()
    np.testing.assert_array_equal(got, p[ind[..., 0], ind[..., 1]])
    np.testing.assert_array_equal(flow.gather_nd(_t(p), flow.tensor([[1, 2, 3]])).numpy(), [23.0])


def test_masked_scatter_forward():
    x = flow.zeros(2, 3)
    mask = flow.tensor([True, False, True])
    out = x.masked_scatter(mask, flow.tensor([1.0, 2.0, 3.0, 4.0, 5.0]))
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 2], [3, 0, 4]])
    x.masked_scatter_(mask, flow.ones(2, 2))
    np.testing.assert_array_equal(x.numpy(), [[1, 0, 1], [1, 0, 1]])


def test_nonzero_and_argwhere():
    a = np.array([[0, 1, 0], [2, 0, 3]])
    got = flow.nonzero(_t(a))
    assert got.dtype is flow.int64
    np.testing.assert_array_equal(got.numpy(), np.argwhere(a))
    cols = _t(a).nonzero(as_tuple=True)
    for c, r in zip(cols, np.nonzero(a)):
        np.testing.assert_array_equal(c.numpy(), r)
    arg = flow.argwhere(_t(a))
    assert arg.dtype is flow.int32
    np.testing.assert_array_equal(arg.numpy(), np.argwhere(a))
    assert tuple(flow.nonzero(flow.zeros(2, 3)).shape) == (0, 2)
    (c0,) = flow.nonzero(flow.tensor(5.0), as_tuple=True)
    np.testing.assert_array_equal(c0.numpy(), [0])


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = _arr(3, 4)
    idx = np.array([[0, 3, 3], [2, 2, 1]])
    tx, ti = torch.tensor(x, requires_grad=True), torch.tensor(idx)
    fx = flow.tensor(x, requires_grad=True)
    g = torch.tensor(_arr(2, 3))
    out_t = torch.gather(tx, 1, ti)
    out_t.backward(g)
    out_f = flow.gather(fx, 1, _t(idx))
    out_f.backward(flow.tensor(g.numpy()))
    np.testing.assert_allclose(out_f.detach().numpy(), out_t.detach().numpy())
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy())
    src = _arr(2, 3)
    np.testing.assert_allclose(
        flow.scatter_add(_t(x), 1, _t(idx), _t(src)).numpy(),
        torch.scatter_add(torch.tensor(x), 1, ti, torch.tensor(src)).numpy())
    src2 = _arr(3, 2)
    np.testing.assert_allclose(
        flow.index_add(_t(x), 1, flow.tensor([0, 0]), _t(src2), alpha=3.0).numpy(),
        torch.index_add(torch.tensor(x), 1, torch.tensor([0, 0]), torch.tensor(src2),
                        alpha=3.0).numpy())


# ---- errors -----------------------------------------------------------------------------------

def test_index_errors_name_op_and_shape():
    x = flow.zeros(10)
    for bad in (10, -11):
        # OneFlow's words, which OneFlow's tests match ("out of range", "out of bounds",
        # "for dimension with size 0")
        with pytest.raises(IndexError, match=r"getitem: index .* out of range \[-10, 9\]: out "
                                             r"of bounds for dimension with size 10 "
                                             r"\(dimension 0 .*\(10,\)"):
            x[bad]
    with pytest.raises(IndexError, match="out of bounds for dimension with size 0"):
        flow.zeros(10, 0)[:, [0, 1]]
    with pytest.raises(IndexError, match=r"too many indices .*\(10,\)"):
        x[1, 2]
    with pytest.raises(IndexError, match="setitem: index 12"):
        x[[1, 12]] = 1.0
    with pytest.raises(IndexError):
        x[0.0]
    with pytest.raises(IndexError):
        x[flow.tensor([1.0])]
    with pytest.raises(RuntimeError, match="slice step"):
        x[::0]
    with pytest.raises(RuntimeError, match="negative steps"):
        x[::-1]
    with pytest.raises(RuntimeError, match="slice indices"):
        x[0.0:2.0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="too many indices"):
        flow.zeros(5)[flow.zeros(0, 2, dtype=flow.uint8)]
    with pytest.raises(IndexError, match=r"shape of the mask \(2,\)"):
        flow.zeros(5)[flow.tensor([True, False])]
    with pytest.raises(IndexError, match="could not be broadcast"):
        flow.zeros(3, 3)[[0, 1], [0, 1, 2]]
    with pytest.raises(RuntimeError, match=r"setitem.*\(3,\).*\(2,\)"):
        x[:3] = flow.ones(2)


def test_gather_scatter_errors_name_op_and_shapes():
    x = flow.zeros(2, 3)
    with pytest.raises(RuntimeError, match=r"gather.*\(2, 3\).*index 3 is out of range"):
        flow.gather(x, 1, flow.tensor([[3], [0]])).numpy()  # kernel errors surface at a sync
    with pytest.raises(RuntimeError, match=r"gather.*as many dims.*\(2, 3\)"):
        flow.gather(x, 1, flow.tensor([0]))
    with pytest.raises(RuntimeError, match="gather.*integer dtype"):
        flow.gather(x, 1, flow.zeros(2, 1))
    with pytest.raises(RuntimeError, match=r"scatter.*index -1 is out of range"):
        flow.scatter(x, 0, flow.tensor([[-1, 0, 0]]), 1.0).numpy()
    with pytest.raises(RuntimeError, match="index_add.*source must have shape"):
        flow.index_add(x, 0, flow.tensor([0]), flow.ones(2, 3))
    with pytest.raises(RuntimeError, match="masked_select.*cannot be broadcast"):
        flow.masked_select(x, flow.tensor([True, False]))
    with pytest.raises(IndexError, match="gather_nd"):
        flow.gather_nd(x, flow.tensor([[0, 0, 0]]))
