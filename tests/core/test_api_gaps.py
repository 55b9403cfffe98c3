"""Small API gaps filled for PyTorch/OneFlow users: ``nn.functional.one_hot`` and ``normalize``,
``flow.linalg`` norms (vector, matrix, dispatching ``norm``), and integer scalars wrapping to an
integer tensor's dtype as PyTorch casts them (``uint8 tensor + 300``).

Forward results are compared with NumPy or PyTorch, gradients with finite differences in
float64; both new nn.functional ops are also traced into an nn.Graph.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
import actorflow.linalg as LA
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.ops.registry import OpError
from tests.helpers import FnGraph, gradcheck, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
INF = math.inf
rng = np.random.default_rng(0)
A = rng.standard_normal((2, 3, 4))


# ---- one_hot ------------------------------------------------------------------------------------

def _np_one_hot(idx: np.ndarray, n: int) -> np.ndarray:
    return (idx[..., None] == np.arange(n)).astype(np.int64)


@pytest.mark.parametrize("dtype", [flow.int64, flow.int32, flow.uint8, flow.int8])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
def test_one_hot_matches_numpy_for_integer_tensors_of_any_shape(dtype, shape):
    idx = rng.integers(0, 6, size=shape)
    out = F.one_hot(flow.tensor(idx, dtype=dtype), num_classes=7)
    assert out.dtype is flow.int64 and tuple(out.shape) == shape + (7,)
    np.testing.assert_array_equal(out.numpy(), _np_one_hot(idx, 7))
    assert not out.requires_grad


def test_one_hot_default_num_classes_is_max_plus_one():
    idx = np.array([[0, 3], [1, 2]])
    out = F.one_hot(flow.tensor(idx))
    np.testing.assert_array_equal(out.numpy(), _np_one_hot(idx, 4))


@needs_torch
def test_one_hot_matches_pytorch():
    idx = rng.integers(0, 5, size=(3, 4))
    for n in (-1, 5, 8):
        np.testing.assert_array_equal(F.one_hot(flow.tensor(idx), n).numpy(),
                                      torch.nn.functional.one_hot(torch.tensor(idx), n).numpy())
    empty = F.one_hot(flow.tensor(np.zeros((0, 2), np.int64)), 3)
    assert tuple(empty.shape) == tuple(torch.nn.functional.one_hot(
        torch.zeros((0, 2), dtype=torch.int64), 3).shape)


def test_one_hot_on_and_off_values_as_in_oneflow():
    out = F.one_hot(flow.tensor([0, 2]), 3, on_value=5, off_value=-1)
    assert out.dtype is flow.int64
    np.testing.assert_array_equal(out.numpy(), [[5, -1, -1], [-1, -1, 5]])
    out = F.one_hot(flow.tensor([1]), 2, on_value=0.5)
    assert out.dtype is flow.float32
    np.testing.assert_array_equal(out.numpy(), [[0.0, 0.5]])


def test_one_hot_no_gradient_flows_through_it():
    x = flow.tensor([0.0, 1.0], requires_grad=True)
    y = (F.one_hot(flow.tensor([1, 0]), 2) * x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_one_hot_errors_name_the_op_and_shape():
    with pytest.raises(TypeError, match=r"one_hot: expected an integer.*float32.*\(2,\)"):
        F.one_hot(flow.tensor([0.0, 1.0]), 2)
    with pytest.raises(TypeError, match="one_hot: expected an integer.*bool"):
        F.one_hot(flow.tensor([True]), 2)
    with pytest.raises(RuntimeError, match=r"one_hot: class values must be non-negative, got -1"):
        F.one_hot(flow.tensor([0, -1]), 3).numpy()
    with pytest.raises(RuntimeError, match=r"smaller than num_classes=3, got 3 .*\(2,\)"):
        F.one_hot(flow.tensor([0, 3]), 3).numpy()
    with pytest.raises(RuntimeError, match="non-negative, got -5"):
        F.one_hot(flow.tensor([-2, -5])).numpy()  # num_classes=-1 infers 0 classes
    with pytest.raises(ValueError, match=r"one_hot: cannot infer num_classes from an empty"):
        F.one_hot(flow.tensor(np.zeros(0, np.int64)))
    with pytest.raises(ValueError, match=r"one_hot: num_classes must be -1 or .* got -2"):
        F.one_hot(flow.tensor([0]), -2)
    with pytest.raises(TypeError, match="one_hot: expected a Tensor"):
        F.one_hot([0, 1], 2)


# ---- normalize ----------------------------------------------------------------------------------

def _np_normalize(a, p, dim, eps=1e-12):
    axes = dim if isinstance(dim, tuple) else (dim,)
    a64 = a.astype(np.float64)
    if p == INF:
        n = np.abs(a64).max(axis=axes, keepdims=True)
    else:
        n = (np.abs(a64) ** p).sum(axis=axes, keepdims=True) ** (1 / p)
    return a64 / np.maximum(n, eps)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (INF, 1), (2.0, (0, 2))])
def test_normalize_forward_matches_numpy(p, dim):
    a = A.astype(np.float32)
    out = F.normalize(flow.tensor(a), p=p, dim=dim)
    assert out.dtype is flow.float32
    np.testing.assert_allclose(out.numpy(), _np_normalize(a, p, dim), rtol=1e-5, atol=1e-7)


@needs_torch
def test_normalize_matches_pytorch_including_zero_rows_and_eps():
    a = A.copy()
    a[0, :, 1] = 0.0
    for kw in ({}, {"p": 1}, {"dim": 0}, {"p": INF, "dim": -1}, {"eps": 0.5}):
        np.testing.assert_allclose(F.normalize(flow.tensor(a), **kw).numpy(),
                                   torch.nn.functional.normalize(torch.tensor(a), **kw).numpy(),
                                   rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(F.normalize(flow.tensor([1.0, 2.0]), dim=0).numpy(),
                               torch.nn.functional.normalize(torch.tensor([1.0, 2.0]),
                                                             dim=0).numpy(), rtol=1e-6)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0), (INF, 1), (2.0, (0, 2))])
def test_normalize_gradient_matches_finite_differences(p, dim):
    gradcheck(lambda x: F.normalize(x, p=p, dim=dim), A)


def test_normalize_out_and_errors():
    out = flow.empty(2, 3, 4)
    r = F.normalize(flow.tensor(A.astype(np.float32)), out=out)
    assert r is out
    np.testing.assert_allclose(out.numpy(), _np_normalize(A, 2.0, 1), rtol=1e-5)
    with pytest.raises(TypeError, match=r"normalize: expected a floating point tensor, got "
                                        r"actorflow.int64 \(input shape \(1, 2\)\)"):
        F.normalize(flow.tensor([[1, 2]]))
    with pytest.raises(OpError, match="normalize: dim 1 is out of range"):
        F.normalize(flow.tensor([1.0, 2.0]))


# ---- flow.linalg --------------------------------------------------------------------------------

VECTOR_CASES = [
    (2, None), (1, 0), (3.5, -1), (0.5, (0, 2)), (INF, None), (-INF, 1), (INF, (1, 2)), (0, 2),
    (-1, 1), (-2.5, (0, 1)),
]


def _np_vector_norm(a, ord, dim, keepdim=False):
    axes = None if dim is None else (dim if isinstance(dim, tuple) else (dim,))
    x = np.abs(a)
    if ord == INF:
        return x.max(axis=axes, keepdims=keepdim)
    if ord == -INF:
        return x.min(axis=axes, keepdims=keepdim)
    if ord == 0:
        return (x != 0).sum(axis=axes, keepdims=keepdim).astype(a.dtype)
    with np.errstate(divide="ignore"):
        return (x ** ord).sum(axis=axes, keepdims=keepdim) ** (1.0 / ord)


@pytest.mark.parametrize("ord,dim", VECTOR_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_vector_norm_forward_matches_numpy(ord, dim, keepdim):
    out = LA.vector_norm(flow.tensor(A), ord, dim, keepdim)
    np.testing.assert_allclose(out.numpy(), _np_vector_norm(A, ord, dim, keepdim), rtol=1e-12)
    out32 = LA.vector_norm(flow.tensor(A.astype(np.float32)), ord, dim, keepdim)
    assert out32.dtype is flow.float32
    np.testing.assert_allclose(out32.numpy(), _np_vector_norm(A, ord, dim, keepdim), rtol=1e-5)


@pytest.mark.parametrize("ord,dim", [c for c in VECTOR_CASES if c[0] != 0])
def test_vector_norm_gradient_matches_finite_differences(ord, dim):
    gradcheck(lambda x: LA.vector_norm(x, ord, dim), A)


def test_flow_norm_and_tensor_norm_agree_with_vector_norm():
    x = flow.tensor(A)
    for ord, dim in VECTOR_CASES:
        ref = LA.vector_norm(x, ord, dim).numpy()
        np.testing.assert_array_equal(flow.norm(x, ord, dim).numpy(), ref)
        np.testing.assert_array_equal(x.norm(ord, dim).numpy(), ref)
    np.testing.assert_array_equal(LA.norm(x).numpy(), flow.norm(x).numpy())


MATRIX_CASES = [("fro", (-2, -1)), (1, (-2, -1)), (-1, (1, 2)), (INF, (2, 0)), (-INF, (0, 1)),
                ("fro", (2, 0))]


def _np_matrix_norm(a, ord, dim, keepdim=False):
    d0, d1 = (d % a.ndim for d in dim)
    m = np.moveaxis(a, (d0, d1), (-2, -1))
    if ord == "fro":
        r = np.sqrt((m * m).sum(axis=(-2, -1)))
    else:
        sums = np.abs(m).sum(axis=-2 if abs(ord) == 1 else -1)
        r = sums.max(axis=-1) if ord > 0 else sums.min(axis=-1)
    if keepdim:
        r = np.expand_dims(r, tuple(sorted((d0, d1))))
    return r


@pytest.mark.parametrize("ord,dim", MATRIX_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_forward_matches_numpy(ord, dim, keepdim):
    out = LA.matrix_norm(flow.tensor(A), ord, dim, keepdim)
    np.testing.assert_allclose(out.numpy(), _np_matrix_norm(A, ord, dim, keepdim), rtol=1e-12)


def test_matrix_norm_2d_matches_numpy_linalg():
    m = A[0]
    for ord in ("fro", 1, -1, INF, -INF):
        np.testing.assert_allclose(LA.matrix_norm(flow.tensor(m), ord).numpy(),
                                   np.linalg.norm(m, ord), rtol=1e-12)


@pytest.mark.parametrize("ord,dim", MATRIX_CASES)
def test_matrix_norm_gradient_matches_finite_differences(ord, dim):
    gradcheck(lambda x: LA.matrix_norm(x, ord, dim), A)


@needs_torch
def test_linalg_norms_match_pytorch():
    x, tx = flow.tensor(A), torch.tensor(A)
    m, tm = flow.tensor(A[0]), torch.tensor(A[0])
    pairs = [
        (LA.norm(x), torch.linalg.norm(tx)),
        (LA.norm(x, dim=(0, 2)), torch.linalg.norm(tx, dim=(0, 2))),
        (LA.norm(x, 3, dim=1, keepdim=True), torch.linalg.norm(tx, 3, dim=1, keepdim=True)),
        (LA.norm(x, INF, dim=(1, 2)), torch.linalg.norm(tx, INF, dim=(1, 2))),
        (LA.norm(x, -1, dim=(2,)), torch.linalg.norm(tx, -1, dim=(2,))),
        (LA.norm(m, 1), torch.linalg.norm(tm, 1)),
        (LA.norm(m, "fro"), torch.linalg.norm(tm, "fro")),
        (LA.norm(m[0], INF), torch.linalg.norm(tm[0], INF)),
        (LA.vector_norm(x, 0.5, (0, 1)), torch.linalg.vector_norm(tx, 0.5, (0, 1))),
        (LA.vector_norm(x, dim=()), torch.linalg.vector_norm(tx, dim=())),
        (LA.matrix_norm(x, -INF, (2, 1), keepdim=True),
         torch.linalg.matrix_norm(tx, -INF, (2, 1), keepdim=True)),
        (LA.matrix_norm(flow.empty(3, 0), 1), torch.linalg.matrix_norm(torch.empty(3, 0), 1)),
        (LA.vector_norm(flow.empty(2, 0), INF, dim=0),
         torch.linalg.vector_norm(torch.empty(2, 0), INF, dim=0)),
    ]
    for ours, ref in pairs:
        assert tuple(ours.shape) == tuple(ref.shape)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)


def test_linalg_norm_dtype_argument_widens_only():
    x = flow.tensor(A.astype(np.float32))
    out = LA.vector_norm(x, dtype=flow.float64)
    assert out.dtype is flow.float64
    np.testing.assert_allclose(out.numpy(), np.sqrt((A.astype(np.float32).astype(np.float64)
                                                     ** 2).sum()), rtol=1e-12)
    with pytest.raises(TypeError, match="without narrowing"):
        LA.vector_norm(flow.tensor(A), dtype=flow.float32)
    with pytest.raises(TypeError, match="dtype must be a floating point type"):
        LA.matrix_norm(x, dtype=flow.int64)


def test_linalg_errors_name_the_function_and_shape():
    x = flow.tensor(A)
    with pytest.raises(TypeError, match=r"linalg.vector_norm: expected a floating point tensor, "
                                        r"got actorflow.int64 \(input shape \(3,\)\)"):
        LA.vector_norm(flow.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="linalg.vector_norm: ord must be a number"):
        LA.vector_norm(x, "fro")
    with pytest.raises(ValueError, match=r"cannot compute the inf norm over dim 0.*\(0,\)"):
        LA.vector_norm(flow.empty(0), INF)
    with pytest.raises(ValueError, match=r"cannot compute the -inf norm over dim 1"):
        LA.vector_norm(flow.empty(2, 0), -INF, dim=1)
    with pytest.raises(OpError, match="linalg.vector_norm: a dim appears multiple times"):
        LA.vector_norm(x, 2, (0, 0))
    with pytest.raises(ValueError, match=r"linalg.matrix_norm: the input must have at least 2 "
                                         r"dims, got shape \(4,\)"):
        LA.matrix_norm(flow.tensor(A[0, 0]))
    with pytest.raises(ValueError, match="linalg.matrix_norm: dim must be a 2-tuple"):
        LA.matrix_norm(x, 1, dim=(1,))
    with pytest.raises(ValueError, match=r"linalg.matrix_norm: the two dims must differ"):
        LA.matrix_norm(x, 1, dim=(1, -2))
    for ord in ("nuc", 2, -2):
        with pytest.raises(NotImplementedError, match=f"linalg.matrix_norm: ord={ord!r} needs "
                                                      f"singular values"):
            LA.matrix_norm(x, ord)
    with pytest.raises(ValueError, match="linalg.matrix_norm: unsupported ord 3"):
        LA.matrix_norm(x, 3)
    with pytest.raises(ValueError, match="linalg.matrix_norm: unsupported ord 'foo'"):
        LA.matrix_norm(x, "foo")
    with pytest.raises(ValueError, match=r"cannot compute the -1 norm: dim 1 is empty"):
        LA.matrix_norm(flow.empty(3, 0), -1)
    with pytest.raises(ValueError, match="linalg.norm: when ord is given without dim the input "
                                         r"must be 1-d or 2-d, got shape \(2, 3, 4\)"):
        LA.norm(x, 2)
    with pytest.raises(ValueError, match=r"linalg.norm: dim must be an int or a tuple of 1 or 2"):
        LA.norm(x, dim=(0, 1, 2))
    with pytest.raises(ValueError, match=r"linalg.norm: ord='fro' is a matrix norm"):
        LA.norm(x, "fro", dim=1)
    with pytest.raises(NotImplementedError, match="linalg.norm: ord='nuc'"):
        LA.norm(x[0], "nuc")


def test_linalg_namespace():
    assert flow.linalg is LA
    assert flow.linalg.matmul is flow.matmul
    assert not hasattr(flow, "vector_norm") and not hasattr(flow, "one_hot")
    assert F.one_hot is not None and F.normalize is not None


# ---- nn.Graph -----------------------------------------------------------------------------------

def test_normalize_and_one_hot_inside_an_nn_graph():
    def fn(x, idx):
        return F.normalize(x, dim=-1) + F.one_hot(idx, 4).to(flow.float32), \
            LA.matrix_norm(x, 1) + LA.vector_norm(x, INF)

    x = flow.tensor(A.astype(np.float32))
    idx = flow.tensor(rng.integers(0, 4, size=(2, 3)))
    g = FnGraph(fn)
    got = g(x, idx)
    want = fn(x, idx)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    assert {"one_hot", "norm", "clamp", "div"} <= {o.op_type for o in g.forward_job.ops}


def test_normalize_trains_inside_an_nn_graph():
    lin = nn.Linear(4, 3).to(flow.float64)
    opt = flow.optim.SGD(lin.parameters(), lr=0.1)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.add_optimizer(opt)

        def build(self, x):
            loss = F.normalize(self.lin(x), dim=1).sum()
            loss.backward()
            return loss

    x = flow.tensor(A[0])
    w0 = lin.weight.numpy().copy()
    xt = flow.tensor(A[0])
    wt = flow.tensor(w0, requires_grad=True)
    F.normalize(flow.matmul(xt, wt.t()) + lin.bias.detach(), dim=1).sum().backward()
    Train()(x)
    np.testing.assert_allclose(lin.weight.numpy(), w0 - 0.1 * wt.grad.numpy(), rtol=1e-10)


def test_one_hot_in_a_graph_needs_num_classes_and_checks_values_at_run_time():
    g = FnGraph(lambda idx: F.one_hot(idx))
    with pytest.raises(Exception, match="one_hot: num_classes=-1 needs the input's values"):
        g(flow.tensor([0, 1]))
    g = FnGraph(lambda idx: F.one_hot(idx, 3))
    with pytest.raises(RuntimeError, match="smaller than num_classes=3, got 5"):
        g(flow.tensor([0, 5])).numpy()
    np.testing.assert_array_equal(g(flow.tensor([1, 2])).numpy(), [[0, 1, 0], [0, 0, 1]])


# ---- integer scalars wrap to the tensor's dtype -------------------------------------------------

def test_uint8_plus_300_wraps_as_in_pytorch():
    out = flow.tensor([250], dtype=flow.uint8) + 300
    assert out.dtype is flow.uint8
    np.testing.assert_array_equal(out.numpy(), [38])


WRAP_OPS = {
    "add": lambda x, s: x + s, "radd": lambda x, s: s + x, "sub": lambda x, s: x - s,
    "rsub": lambda x, s: s - x, "mul": lambda x, s: x * s, "floordiv": lambda x, s: x // s,
    "rfloordiv": lambda x, s: s // x, "mod": lambda x, s: x.remainder(s),
    "fmod": lambda x, s: x.fmod(s), "and": lambda x, s: x & s,
    "or": lambda x, s: x | s, "xor": lambda x, s: x ^ s, "eq": lambda x, s: x == s,
    "gt": lambda x, s: x > s, "le": lambda x, s: x <= s, "rpow": lambda x, s: s ** x,
    "add_": lambda x, s: x.clone().add_(s), "mul_": lambda x, s: x.clone().mul_(s),
}
WRAP_CASES = [("uint8", [250, 44, 3], [300, -1, 556, -300]),
              ("int8", [100, -100, 7], [200, -200, 1000]),
              ("int16", [30000, -5, 3], [40000, -70000]),
              ("int32", [2**31 - 1, -7, 3], [2**40 + 3, -(2**33) - 1, 2**32]),
              ("int64", [2**62, -7, 3], [2**63, 2**64 - 1])]


@needs_torch
@pytest.mark.parametrize("dtype,values,scalars", WRAP_CASES)
@pytest.mark.parametrize("op", sorted(WRAP_OPS))
def test_integer_scalar_wraparound_matches_pytorch(dtype, values, scalars, op):
    fn = WRAP_OPS[op]
    x = flow.tensor(values, dtype=getattr(flow, dtype))
    tx = torch.tensor(values, dtype=getattr(torch, dtype))
    if op == "rpow" and min(values) < 0:
        values = [abs(v) for v in values]  # integer powers with negative exponents: not here
        x = flow.tensor(values, dtype=getattr(flow, dtype))
        tx = torch.tensor(values, dtype=getattr(torch, dtype))
    for s in scalars:
        if op in ("floordiv", "mod", "fmod", "rfloordiv", "rpow"):
            try:
                ref = fn(tx, s)
            except (RuntimeError, ZeroDivisionError):
                continue  # a wrapped divisor of 0, or PyTorch's own refusal
        else:
            ref = fn(tx, s)
        ours = fn(x, s)
        assert str(ours.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (op, s)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy(), err_msg=f"{op} {dtype} {s}")


def test_integer_scalar_wraparound_zero_dim_and_lazy_graph():
    out = flow.tensor(250, dtype=flow.uint8) + 300
    assert out.dtype is flow.uint8 and int(out.numpy()) == 38
    g = FnGraph(lambda x: (x + 300, x * -1, x == 44))
    a, b, c = g(flow.tensor([250, 44], dtype=flow.uint8))
    np.testing.assert_array_equal(a.numpy(), [38, 88])
    np.testing.assert_array_equal(b.numpy(), [6, 212])
    np.testing.assert_array_equal(c.numpy(), [False, True])


def test_float_scalars_and_float_or_bool_tensors_are_unchanged():
    x = flow.tensor([250, 3], dtype=flow.uint8)
    out = x + 300.0
    assert out.dtype is flow.float32
    np.testing.assert_array_equal(out.numpy(), [550.0, 303.0])
    np.testing.assert_allclose((x / 300).numpy(), [250 / 300, 3 / 300], rtol=1e-6)
    b = flow.tensor([True, False]) + 300
    assert b.dtype is flow.int64
    np.testing.assert_array_equal(b.numpy(), [301, 300])
    f = flow.tensor([1.0]) + 2**70
    np.testing.assert_allclose(f.numpy(), [2.0**70])
    np.testing.assert_array_equal((x * True).numpy(), [250, 3])


def test_fill_values_must_fit_as_in_pytorch():
    u = flow.zeros(2, dtype=flow.uint8)
    np.testing.assert_array_equal(u.clone().fill_(-1).numpy(), [255, 255])  # allowed, wraps
    np.testing.assert_array_equal(u.clone().fill_(2.5).numpy(), [2, 2])
    np.testing.assert_array_equal(u.masked_fill(flow.tensor([True, False]), 200).numpy(),
                                  [200, 0])
    for v in (300, -256, 255.5, -1.0, INF, math.nan):
        with pytest.raises(OverflowError, match=f"fill: the value {v!r} cannot be converted to "
                                                f"actorflow.uint8 without overflow"):
            u.clone().fill_(v)
    with pytest.raises(OverflowError, match="masked_fill: the value 128 cannot be converted"):
        flow.zeros(2, dtype=flow.int8).masked_fill(flow.tensor([True, False]), 128)
    np.testing.assert_array_equal(flow.zeros(1, dtype=flow.bool).fill_(300).numpy(), [True])


def test_out_of_range_exponent_and_huge_ints_raise():
    x = flow.tensor([2, 3], dtype=flow.uint8)
    with pytest.raises(OverflowError, match="scalar_pow: the value 256 cannot be converted to "
                                            "actorflow.uint8"):
        x ** 256
    np.testing.assert_array_equal((x ** 255).numpy(), (np.array([2, 3], np.uint8) ** 255))
    with pytest.raises(OverflowError, match="scalar_add: the integer scalar 2361183241434822606848 "
                                            "does not fit in 64 bits"):
        x + 2**71
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        flow.tensor([1]) - (-(2**63) - 1)


def test_add_sub_alpha_match_torch():
    torch = pytest.importorskip("torch")
    x, tx = flow.tensor([1, 2]), torch.tensor([1, 2])
    assert x.add(300, alpha=2).tolist() == tx.add(300, alpha=2).tolist()
    assert x.sub(1, alpha=2).tolist() == tx.sub(1, alpha=2).tolist()
    assert flow.sub(x, flow.tensor([1, 1]), alpha=3).tolist() == \
        torch.sub(tx, torch.tensor([1, 1]), alpha=3).tolist()
    y, ty = flow.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    y.add_(flow.tensor([1.0, 1.0]), alpha=0.5).sub_(1, alpha=2)
    ty.add_(torch.tensor([1.0, 1.0]), alpha=0.5).sub_(1, alpha=2)
    assert y.tolist() == ty.tolist()


def test_add_alpha_gradient():
    a = flow.tensor([1.0, 2.0], requires_grad=True)
    b = flow.tensor([3.0, 4.0], requires_grad=True)
    flow.sub(a, b, alpha=3).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0] and b.grad.tolist() == [-3.0, -3.0]
