"""Binary elementwise ops, comparisons, logical/bitwise ops, where/clamp/masked_fill/fill and
in-place behaviour: forward vs NumPy, gradients vs finite differences and vs PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(1234)


def _rand(*shape, dtype=np.float64, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def _away_from_ints(a, step=1.0):
    """Values whose quotient by ``step`` is not near an integer (floor/remainder kinks)."""
    return (np.floor(a / step) + RNG.uniform(0.2, 0.8, size=a.shape)) * step


# ---- forward vs NumPy ---------------------------------------------------------------------------

BINARY = {
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "fmod": np.fmod,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "atan2": np.arctan2,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_forward_matches_numpy(name, dtype):
    a = _rand(3, 4, dtype=dtype)
    b = _rand(4, dtype=dtype)
    b[b == 0] = 0.5
    a[0, :2] = b[:2]  # some ties for comparisons and maximum
    ref = BINARY[name]
    fn = getattr(flow, name)
    got = fn(flow.tensor(a), flow.tensor(b))
    want = ref(a, b)
    assert got.dtype is flow.tensor(want).dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    # scalar forms on both sides
    np.testing.assert_allclose(fn(flow.tensor(a), 0.75).numpy(), ref(a, dtype(0.75)), rtol=1e-6)
    np.testing.assert_allclose(fn(-1.25, flow.tensor(a)).numpy(), ref(dtype(-1.25), a), rtol=1e-6)


def test_pow_forms():
    a = _rand(2, 3, low=0.5, high=2.0)
    b = _rand(3, low=-1.5, high=1.5)
    x = flow.tensor(a)
    np.testing.assert_allclose((x ** flow.tensor(b)).numpy(), a ** b)
    np.testing.assert_allclose((x ** 2).numpy(), a ** 2)
    np.testing.assert_allclose((x ** 0.5).numpy(), np.sqrt(a))
    np.testing.assert_allclose((2.0 ** x).numpy(), 2.0 ** a)
    np.testing.assert_allclose(flow.pow(3, x).numpy(), 3.0 ** a)
    i = flow.tensor([1, 2, 3])
    assert (i ** 2).dtype is flow.int64 and (i ** 2).tolist() == [1, 4, 9]
    assert (2 ** i).tolist() == [2, 4, 8]
    assert (i ** 0.5).dtype is flow.float32


def test_integer_division_family_signs():
    a = flow.tensor([7, -7, 7, -7])
    b = flow.tensor([2, 2, -2, -2])
    assert (a // b).tolist() == [3, -4, -4, 3]
    assert a.remainder(b).tolist() == [1, 1, -1, -1]
    assert flow.fmod(a, b).tolist() == [1, -1, 1, -1]
    assert (a % b).tolist() == [1, -1, 1, -1]  # OneFlow's % is fmod
    assert (a // b).dtype is flow.int64
    assert (-7 // flow.tensor([2])).tolist() == [-4]
    assert flow.remainder(7, flow.tensor([-2])).tolist() == [-1]
    assert (7 % flow.tensor([-2])).tolist() == [1] and (-7 % flow.tensor([2])).tolist() == [-1]
    f = flow.tensor([-7.5, 7.5])
    np.testing.assert_allclose(f.remainder(2).numpy(), [0.5, 1.5])
    np.testing.assert_allclose((f % 2).numpy(), [-1.5, 1.5])
    np.testing.assert_allclose(flow.fmod(f, 2).numpy(), [-1.5, 1.5])


def test_integer_division_by_zero_raises():
    with pytest.raises(RuntimeError, match="floor_divide.*ZeroDivisionError"):
        (flow.tensor([1, 2]) // 0).numpy()  # kernel errors surface at a sync point
    with pytest.raises(RuntimeError, match="remainder"):
        flow.tensor([1, 2]).remainder(flow.tensor([1, 0])).numpy()
    with pytest.raises(RuntimeError, match="fmod"):
        (flow.tensor([1, 2]) % flow.tensor([1, 0])).numpy()
    # floats give inf/nan as in PyTorch
    assert np.isinf((flow.tensor([1.0]) // 0.0).numpy()).all()


def test_div_rounding_modes():
    a = flow.tensor([7.0, -7.0, 5.5])
    b = flow.tensor([2.0, 2.0, -2.0])
    assert flow.div(a, b, rounding_mode="trunc").tolist() == [3.0, -3.0, -2.0]
    assert flow.div(a, b, rounding_mode="floor").tolist() == [3.0, -4.0, -3.0]
    i = flow.tensor([7, -7, 9])
    r = i.div(flow.tensor([2, 2, -4]), rounding_mode="trunc")
    assert r.dtype is flow.int64 and r.tolist() == [3, -3, -2]
    assert flow.divide(i, 2).dtype is flow.float32
    with pytest.raises(ValueError, match="rounding_mode"):
        flow.div(a, b, rounding_mode="round")
    c = a.clone()
    c.div_(b, rounding_mode="floor")
    assert c.tolist() == [3.0, -4.0, -3.0]


def test_comparisons_take_scalars_and_operators():
    x = flow.tensor([1.0, 2.0, 3.0])
    assert (x > 2).tolist() == [False, False, True]
    assert (x >= 2).tolist() == [False, True, True]
    assert (x < 2.5).tolist() == [True, True, False]
    assert (x == 2).tolist() == [False, True, False]
    assert (x != 2).tolist() == [True, False, True]
    assert (2 < x).tolist() == [False, False, True]
    assert flow.gt(2, x).tolist() == [True, False, False]
    assert (x == 2).dtype is flow.bool
    i = flow.tensor([1, 2, 3])
    assert (i > 1.5).tolist() == [False, True, True]  # int tensor vs float scalar
    assert (x == None) is False  # noqa: E711  (falls back to identity, as in PyTorch)
    assert (x != None) is True  # noqa: E711
    assert flow.greater(x, 1).tolist() == flow.gt(x, 1).tolist()


def test_logical_and_bitwise():
    p = flow.tensor([True, True, False, False])
    q = flow.tensor([True, False, True, False])
    assert (p & q).tolist() == [True, False, False, False]
    assert (p | q).tolist() == [True, True, True, False]
    assert (p ^ q).tolist() == [False, True, True, False]
    assert (~p).tolist() == [False, False, True, True]
    assert flow.logical_not(flow.tensor([0.0, 2.0])).tolist() == [True, False]
    assert flow.logical_and(flow.tensor([0, 3]), 1).tolist() == [False, True]
    a, b = flow.tensor([12, 10, -1]), flow.tensor([10, 6, 5])
    np.testing.assert_array_equal((a & b).numpy(), np.array([12, 10, -1]) & [10, 6, 5])
    np.testing.assert_array_equal((a | b).numpy(), np.array([12, 10, -1]) | [10, 6, 5])
    np.testing.assert_array_equal((a ^ 3).numpy(), np.array([12, 10, -1]) ^ 3)
    np.testing.assert_array_equal((~a).numpy(), ~np.array([12, 10, -1]))
    u = flow.tensor(np.array([1, 255], dtype=np.uint8))
    assert (u & 3).dtype is flow.uint8 and (u & 3).tolist() == [1, 3]
    with pytest.raises(OpError, match="bitwise_and: only integer and bool"):
        flow.bitwise_and(flow.tensor([1.0]), flow.tensor([1.0]))
    with pytest.raises(OpError, match="bitwise_not"):
        ~flow.tensor([1.5])
    with pytest.raises(OpError, match="bitwise_or"):
        flow.tensor([1]) | 1.5


def test_isclose_allclose_equal():
    a = flow.tensor([1.0, 2.0, float("nan"), float("inf")])
    b = flow.tensor([1.0 + 1e-7, 2.1, float("nan"), float("inf")])
    assert flow.isclose(a, b).tolist() == [True, False, False, True]
    assert flow.isclose(a, b, equal_nan=True).tolist() == [True, False, True, True]
    assert a.isclose(b, atol=0.2).tolist() == [True, True, False, True]
    assert flow.allclose(flow.tensor([1.0, 2.0]), flow.tensor([1.0, 2.0 + 1e-9])) is True
    assert flow.allclose(a, b) is False
    assert flow.equal(flow.tensor([1, 2]), flow.tensor([1, 2])) is True
    assert flow.equal(flow.tensor([1, 2]), flow.tensor([1, 3])) is False
    assert flow.equal(flow.tensor([1, 2]), flow.tensor([[1, 2]])) is False
    assert flow.tensor([1.0]).equal(flow.tensor([1.0])) is True


def test_where():
    c = flow.tensor([[True, False, True]])
    x = flow.tensor([[1.0], [2.0]])
    y = flow.tensor([10.0, 20.0, 30.0])
    got = flow.where(c, x, y)
    np.testing.assert_array_equal(got.numpy(), np.where(c.numpy(), x.numpy(), y.numpy()))
    assert flow.where(c, x, 0.0).shape == (2, 3)
    assert flow.where(c, 1.0, 0).dtype is flow.float32
    assert flow.where(c, 1, 0).dtype is flow.int64
    assert flow.where(c, flow.tensor([1, 2, 3]), 2.5).dtype is flow.float32
    assert flow.where(c, flow.tensor([1, 2, 3]), 7).dtype is flow.int64
    assert x.where(x > 1.5, -1.0).tolist() == [[-1.0], [2.0]]
    with pytest.raises(TypeError, match="where"):
        flow.where(c, x)


def test_where_method_oneflow_form():
    """``cond.where(x, y)`` with an integer or bool ``cond`` and non-bool ``x`` (an error in
    PyTorch) is OneFlow's form: the tensor is the condition; PyTorch's form is unchanged."""
    xs = np.array([[-0.5, 0.3], [0.4, -0.7]], dtype=np.float32)
    x, y = flow.tensor(xs), flow.tensor(np.ones((2, 2), np.float32))
    want = np.where([[0, 1], [1, 0]], xs, 1.0)
    for cond in (flow.tensor([[0, 1], [1, 0]], dtype=flow.int32),
                 flow.tensor([[False, True], [True, False]])):
        np.testing.assert_array_equal(cond.where(x, y).numpy(), want)
    i = flow.tensor([[1, 2], [3, 4]])
    mask = flow.tensor([[True, False], [False, True]])
    assert i.where(mask, 0).tolist() == [[1, 0], [0, 4]]  # PyTorch's form on an int tensor
    if torch is not None:
        ti = torch.tensor([[1, 2], [3, 4]])
        assert ti.where(torch.tensor(mask.numpy()), 0).tolist() == i.where(mask, 0).tolist()


def test_clamp_forms():
    a = _rand(3, 4)
    x = flow.tensor(a)
    np.testing.assert_allclose(flow.clamp(x, -0.5, 0.5).numpy(), np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(x.clamp(min=0).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(x.clamp(max=0).numpy(), np.minimum(a, 0))
    np.testing.assert_allclose(flow.clip(x, -1, 1).numpy(), np.clip(a, -1, 1))
    np.testing.assert_allclose(x.clamp_min(0.1).numpy(), np.maximum(a, 0.1))
    np.testing.assert_allclose(x.clamp_max(0.1).numpy(), np.minimum(a, 0.1))
    lo, hi = _rand(4, low=-1, high=0), _rand(3, 1, low=0, high=1)
    got = flow.clamp(x, flow.tensor(lo), flow.tensor(hi))
    np.testing.assert_allclose(got.numpy(), np.minimum(np.maximum(a, lo), hi))
    np.testing.assert_allclose(flow.clamp(x, max=flow.tensor(hi)).numpy(), np.minimum(a, hi))
    # min > max gives max everywhere (as in PyTorch)
    np.testing.assert_allclose(flow.clamp(x, 1.0, -1.0).numpy(), np.full(a.shape, -1.0))
    i = flow.tensor([-3, 0, 5])
    assert flow.clamp(i, 0, 2).dtype is flow.int64 and flow.clamp(i, 0, 2).tolist() == [0, 0, 2]
    assert flow.clamp(i, min=0.5).dtype is flow.float32
    with pytest.raises(OpError, match="clamp: at least one of min and max"):
        flow.clamp(x)


def test_masked_fill_and_fill():
    x = flow.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    m = flow.tensor([True, False, True])
    assert x.masked_fill(m, -1).tolist() == [[-1.0, 2.0, -1.0], [-1.0, 5.0, -1.0]]
    assert flow.masked_fill(x, m, flow.tensor(0.5)).tolist()[0] == [0.5, 2.0, 0.5]
    i = flow.tensor([1, 2, 3])
    assert i.masked_fill(m, 2.7).tolist() == [2, 2, 2]
    y = x.clone()
    v = y._version
    y.masked_fill_(m, 0.0)
    assert y.tolist() == [[0.0, 2.0, 0.0], [0.0, 5.0, 0.0]] and y._version == v + 1
    y.fill_(3)
    assert y.tolist() == [[3.0] * 3] * 2 and y._version == v + 2
    y.fill_(flow.tensor(1.5))
    assert y.tolist() == [[1.5] * 3] * 2
    y.zero_()
    assert y.tolist() == [[0.0] * 3] * 2 and y._version == v + 4
    with pytest.raises(RuntimeError, match="fill_: only a 0-dimensional value tensor"):
        y.fill_(flow.tensor([1.0, 2.0]))
    with pytest.raises(OpError, match="masked_fill"):
        x[0].masked_fill_(flow.tensor([[True], [False]]), 1.0)


def test_type_helpers():
    x = flow.tensor([1, 2])
    assert x.type_as(flow.tensor([1.0], dtype=flow.float64)).dtype is flow.float64
    assert flow.is_floating_point(flow.tensor([1.0])) and not flow.is_floating_point(x)
    assert flow.is_nonzero(flow.tensor([2])) is True
    assert flow.tensor(0.0).is_nonzero() is False
    with pytest.raises(RuntimeError, match="is_nonzero"):
        flow.is_nonzero(x)


# ---- gradients vs finite differences --------------------------------------------------------

def test_gradcheck_arithmetic_binary():
    a, b = _rand(2, 3), _rand(3, low=0.5, high=1.5)
    for fn in (flow.add, flow.sub, flow.mul, flow.div, flow.atan2):
        gradcheck(fn, a, b)
    gradcheck(lambda x: flow.atan2(x, 0.7), a)
    gradcheck(lambda x: flow.atan2(0.7, x), a)
    gradcheck(lambda x: 1.5 / x, b)
    gradcheck(lambda x: 1.5 - x, a)


def test_gradcheck_pow():
    a, b = _rand(2, 3, low=0.5, high=2.0), _rand(3, low=-1.5, high=1.5)
    gradcheck(flow.pow, a, b)
    gradcheck(lambda x: x ** 3, _rand(2, 3))
    gradcheck(lambda x: x ** 0.5, a)
    gradcheck(lambda x: 2.5 ** x, a)
    x = flow.tensor([0.0, 2.0], dtype=flow.float64, requires_grad=True)
    (x ** 0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    e = flow.tensor([0.0, 2.0], dtype=flow.float64, requires_grad=True)
    (flow.tensor([0.0, 0.0], dtype=flow.float64) ** e).sum().backward()
    assert e.grad.tolist() == [0.0, 0.0]  # 0^y with y >= 0: no NaN


def test_gradcheck_rounding_binaries():
    a = _away_from_ints(_rand(2, 3, low=-3, high=3), 0.7)
    b = np.array([0.7, -0.7, 0.7])
    for fn in (flow.floor_divide, flow.remainder, flow.fmod):
        gradcheck(fn, a, b)
        gradcheck(lambda x, f=fn: f(x, 0.7), a)
    pos = np.array([[1.3, 2.2, 0.9], [1.7, 0.6, 1.1]])
    gradcheck(lambda x: 2.0 % x, pos)
    gradcheck(lambda x: flow.fmod(2.0, x), pos)


def test_gradcheck_maximum_minimum_where_clamp():
    a, b = _rand(2, 3), _rand(3)
    gradcheck(flow.maximum, a, b)
    gradcheck(flow.minimum, a, b)
    gradcheck(lambda x: flow.maximum(x, 0.3), a)
    gradcheck(lambda x: flow.minimum(x, 0.3), a)
    c = flow.tensor([[True, False, True]])
    gradcheck(lambda x, y: flow.where(c, x, y), a, b)
    gradcheck(lambda x: flow.where(c, x, 0.0), a)
    gradcheck(lambda x: flow.where(c, 1.0, x), a)
    gradcheck(lambda x: flow.clamp(x, -0.5, 0.5), a)
    gradcheck(lambda x: flow.clamp(x, min=0.1), a)
    gradcheck(lambda x: flow.clamp(x, max=0.1), a)
    gradcheck(lambda x, lo, hi: flow.clamp(x, lo, hi), a, _rand(3, low=-1, high=-0.1),
              _rand(2, 1, low=0.1, high=1))
    gradcheck(lambda x, lo: flow.clamp(x, min=lo), a, _rand(3))
    gradcheck(lambda x, hi: flow.clamp(x, max=hi), a, _rand(1))


def test_gradcheck_masked_fill_and_fills():
    a = _rand(2, 3)
    m = flow.tensor([True, False, True])
    gradcheck(lambda x: flow.masked_fill(x, m, 2.0), a)
    gradcheck(lambda x, v: x.masked_fill(m, v), a, np.array(0.5))
    gradcheck(lambda x, v: (x * 1).masked_fill_(m, v), a, np.array(0.5))
    gradcheck(lambda x: (x * 1).masked_fill_(m, 3.0) * x, a)
    gradcheck(lambda x, v: (x * 1).fill_(v) * x, a, np.array(0.25))
    gradcheck(lambda x: (x * 1).fill_(2.0) * x, a)


def test_max_tie_splits_gradient():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = flow.tensor([1.0, 1.0], requires_grad=True)
    flow.maximum(x, y).sum().backward()
    assert x.grad.tolist() == [0.5, 1.0] and y.grad.tolist() == [0.5, 0.0]


def test_clamp_gradient_at_bounds_passes():
    x = flow.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
    x.clamp(-1.0, 1.0).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]


# ---- vs PyTorch (forward and backward) ------------------------------------------------------

@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("name", ["remainder", "fmod", "pow", "maximum", "minimum", "atan2",
                                  "mul", "div", "sub"])
def test_binary_vs_torch(name):
    a = _rand(3, 4, low=0.3, high=2.0) if name == "pow" else _rand(3, 4)
    b = _rand(4, low=0.5, high=1.5)
    b[1] = a[0, 1]  # a tie
    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx, ty = to_torch(a, True), to_torch(b, True)
    out, tout = getattr(flow, name)(x, y), getattr(torch, name)(tx, ty)
    g = _rand(3, 4)
    out.backward(flow.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_clamp_where_masked_fill_vs_torch():
    a = _rand(3, 4)
    a[0, 0], a[1, 1] = -0.5, 0.5  # exactly on the bounds
    lo, hi = _rand(4, low=-1, high=0), _rand(3, 1, low=0, high=1)
    lo[2] = 0.9  # min > max in places
    cases = [
        (lambda m, x, l, h: m.clamp(x, -0.5, 0.5)),
        (lambda m, x, l, h: m.clamp(x, l, h)),
        (lambda m, x, l, h: m.clamp(x, min=l)),
        (lambda m, x, l, h: m.where(x > 0, x, l)),
        (lambda m, x, l, h: x.masked_fill(x > 0.3, 2.0) * h),
    ]
    for case in cases:
        x, l, h = (flow.tensor(v, requires_grad=True) for v in (a, lo, hi))
        tx, tl, th = (to_torch(v, True) for v in (a, lo, hi))
        out, tout = case(flow, x, l, h), case(torch, tx, tl, th)
        out.sum().backward()
        tout.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy())
        for mine, theirs in ((x, tx), (l, tl), (h, th)):
            got = None if mine.grad is None else mine.grad.numpy()
            want = None if theirs.grad is None else theirs.grad.numpy()
            if want is None or got is None:
                assert got is None or not got.any()
                assert want is None or not want.any()
            else:
                np.testing.assert_allclose(got, want)


# ---- broadcasting properties -------------------------------------------------------------------

_PROPERTY_OPS = [
    ("add", np.add), ("mul", np.multiply), ("maximum", np.maximum), ("atan2", np.arctan2),
    ("lt", np.less), ("remainder", np.remainder), ("logical_xor", np.logical_xor),
]


@settings(max_examples=25, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                 max_side=3),
       op=st.sampled_from(_PROPERTY_OPS), seed=st.integers(0, 2 ** 16))
def test_binary_broadcasting_property(shapes, op, seed):
    rng = np.random.default_rng(seed)
    (sa, sb), want_shape = shapes.input_shapes, shapes.result_shape
    a = rng.uniform(-2, 2, size=sa)
    b = rng.uniform(0.5, 2, size=sb)
    name, ref = op
    got = getattr(flow, name)(flow.tensor(a), flow.tensor(b))
    assert tuple(got.shape) == tuple(want_shape)
    np.testing.assert_allclose(got.numpy(), ref(a, b), rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3,
                                                 max_side=3),
       seed=st.integers(0, 2 ** 16))
def test_where_broadcasting_property(shapes, seed):
    rng = np.random.default_rng(seed)
    sc, sx, sy = shapes.input_shapes
    c, x, y = rng.random(sc) > 0.5, rng.standard_normal(sx), rng.standard_normal(sy)
    got = flow.where(flow.tensor(c), flow.tensor(x), flow.tensor(y))
    np.testing.assert_array_equal(got.numpy(), np.where(c, x, y))
    tx, ty = flow.tensor(x, requires_grad=True), flow.tensor(y, requires_grad=True)
    flow.where(flow.tensor(c), tx, ty).sum().backward()
    full = np.broadcast_to(c, shapes.result_shape)
    np.testing.assert_allclose(tx.grad.numpy().sum(), full.sum())
    np.testing.assert_allclose(ty.grad.numpy().sum(), (~full).sum())


# ---- in-place ops and versions -----------------------------------------------------------------

def test_inplace_methods_bump_versions():
    x = flow.tensor([0.25, 0.5, 0.75], dtype=flow.float64)
    steps = [
        ("add_", (1,), lambda a: a + 1), ("sub_", (0.5,), lambda a: a - 0.5),
        ("mul_", (2,), lambda a: a * 2), ("div_", (4,), lambda a: a / 4),
        ("pow_", (2,), lambda a: a ** 2), ("neg_", (), lambda a: -a),
        ("abs_", (), np.abs), ("sqrt_", (), np.sqrt), ("exp_", (), np.exp),
        ("clamp_", (1.2, 1.5), lambda a: np.clip(a, 1.2, 1.5)),
        ("floor_divide_", (0.5,), lambda a: a // 0.5), ("remainder_", (1.5,), lambda a: a % 1.5),
        ("copy_", (flow.tensor([1.0, 2.0, 3.0]),), lambda a: np.array([1.0, 2.0, 3.0])),
        ("clip_", (None, 2.5), lambda a: np.minimum(a, 2.5)),
        ("zero_", (), np.zeros_like), ("fill_", (2,), lambda a: np.full_like(a, 2)),
    ]
    for i, (name, args, ref) in enumerate(steps):
        before = x.numpy().copy()
        r = getattr(x, name)(*args)
        assert r is x, name
        assert x._version == i + 1, name
        np.testing.assert_allclose(x.numpy(), ref(before), err_msg=name)
        assert x.dtype is flow.float64


def test_inplace_operators():
    x = flow.tensor([1.0, 2.0])
    x += 1
    x *= flow.tensor([2.0, 3.0])
    x -= 1
    x /= 2
    assert x.tolist() == [1.5, 4.0] and x._version == 4


def test_inplace_into_int_rejects_float_results():
    i = flow.tensor([1, 2])
    with pytest.raises(OpError, match="div_.*can't be cast"):
        i.div_(2)
    with pytest.raises(OpError, match="sqrt_"):
        i.sqrt_()
    i.mul_(3)
    assert i.tolist() == [3, 6]


def test_modified_saved_tensor_raises():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    z = x * 1
    w = z * z
    z.mul_(2)
    with pytest.raises(RuntimeError, match="mul_backward.*in-place"):
        w.sum().backward()


def test_inplace_after_op_saving_its_output_raises():
    # tanh_ keeps its output for backward (as in PyTorch), so changing it again is an error
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    z = x * 1
    z.tanh_()
    z.sub_(1)
    with pytest.raises(RuntimeError, match="tanh_backward.*modified by an in-place"):
        z.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises():
    x = flow.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor"):
        x.add_(1)
    with flow.no_grad():
        x.add_(1)
    assert x.tolist() == [2.0]


def test_inplace_chain_gradients_vs_finite_differences():
    b = _rand(3, low=0.5, high=1.5)

    def chain(x, y):
        z = x * 1
        z.mul_(y)
        z.sin_()
        z.pow_(2)
        z.add_(y)
        z.clamp_(-2.0, 1.5)
        return z

    gradcheck(chain, _rand(2, 3), b)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_inplace_chain_vs_torch():
    a, b = _rand(2, 3), _rand(3, low=0.5, high=1.5)

    def chain(x, y, mod):
        z = x * 1
        z.mul_(y)
        z.sin_()
        z.sub_(y)
        z.div_(y)
        z.masked_fill_(z > 0.2, 0.2)
        return mod.exp(z) * x

    x, y = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    tx, ty = to_torch(a, True), to_torch(b, True)
    out, tout = chain(x, y, flow), chain(tx, ty, torch)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10)


# ---- error paths ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["add", "mul", "pow", "maximum", "eq", "logical_and",
                                  "remainder", "atan2"])
def test_shape_mismatch_names_op_and_shapes(name):
    with pytest.raises(OpError) as err:
        getattr(flow, name)(flow.ones(2, 3), flow.ones(4))
    msg = str(err.value)
    assert name in msg and "(2, 3)" in msg and "(4,)" in msg


def test_where_and_clamp_shape_errors():
    with pytest.raises(OpError, match=r"where.*\(2,\).*\(3,\)"):
        flow.where(flow.tensor([True, False]), flow.ones(3), 0.0)
    with pytest.raises(OpError, match=r"clamp.*\(2,\).*\(3,\)"):
        flow.clamp(flow.ones(2), flow.zeros(3))


def test_non_tensor_arguments_rejected():
    with pytest.raises(TypeError, match="pow: expected at least one Tensor"):
        flow.pow(2, 3)
