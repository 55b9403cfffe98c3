"""linear, bmm, softmax, log_softmax, dropout, embedding, scaled_dot_product_attention."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops import OpError
from tests.helpers import gradcheck, to_torch, torch

RNG = np.random.default_rng(3)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _t(a, grad=False):
    return flow.tensor(a, requires_grad=grad)


def _softmax_ref(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _vs_torch(fn, tfn, arrays, tol):
    """Run fn / tfn on the same float arrays; compare outputs and all input gradients."""
    fa = [_t(a, True) for a in arrays]
    ta = [to_torch(a, True) for a in arrays]
    y, ty = fn(*fa), tfn(*ta)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    gy = _rand(*ty.shape).astype(arrays[0].dtype)
    y.backward(flow.tensor(gy))
    ty.backward(to_torch(gy))
    for a, t in zip(fa, ta):
        assert a.grad.dtype == a.dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol * 10)


DTYPES = [(np.float64, 1e-10), (np.float32, 1e-5)]

# ---- linear / bmm -------------------------------------------------------------------------------


def test_linear_numpy():
    x, w, b = _rand(2, 3, 4), _rand(5, 4), _rand(5)
    np.testing.assert_allclose(flow.linear(_t(x), _t(w), _t(b)).numpy(), x @ w.T + b,
                               atol=1e-12)
    np.testing.assert_allclose(flow.linear(_t(x[0, 0]), _t(w)).numpy(), x[0, 0] @ w.T,
                               atol=1e-12)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("xshape,bias", [((6, 4), True), ((2, 3, 4), True), ((4,), False),
                                         ((2, 1, 3, 4), False)])
def test_linear_vs_torch(xshape, bias, dtype, tol):
    arrays = [_rand(*xshape), _rand(5, 4)] + ([_rand(5)] if bias else [])
    arrays = [a.astype(dtype) for a in arrays]
    _vs_torch(flow.linear, torch.nn.functional.linear, arrays, tol)


def test_linear_gradcheck_and_non_contiguous_input():
    gradcheck(flow.linear, _rand(2, 3, 4), _rand(2, 4), _rand(2))
    x, w = _rand(4, 3), _rand(2, 4)
    y = flow.linear(_t(x).transpose(0, 1), _t(w))  # a transposed (non-contiguous) view
    np.testing.assert_allclose(y.numpy(), x.T @ w.T, atol=1e-12)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_bmm_vs_torch():
    _vs_torch(flow.bmm, torch.bmm, [_rand(3, 2, 4), _rand(3, 4, 5)], 1e-10)
    a = _t(_rand(3, 2, 4))
    np.testing.assert_allclose(a.bmm(_t(np.ones((3, 4, 1)))).numpy(),
                               a.numpy().sum(-1, keepdims=True), atol=1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda: flow.linear(_t(_rand(2, 3)), _t(_rand(5, 4))), r"linear.*in_features.*\(2, 3\)"),
    (lambda: flow.linear(_t(_rand(2, 4)), _t(_rand(5, 4)), _t(_rand(4))), "bias must have"),
    (lambda: flow.linear(_t(_rand(2, 4)), _t(_rand(5, 4)).float()), "dtypes differ"),
    (lambda: flow.bmm(_t(_rand(3, 2, 4)), _t(_rand(2, 4, 5))), "batch sizes must match"),
    (lambda: flow.bmm(_t(_rand(2, 4)), _t(_rand(4, 5))), "must be 3-d"),
])
def test_linear_bmm_errors(call, match):
    with pytest.raises((OpError, ValueError, TypeError), match=match):
        call()


# ---- softmax / log_softmax ----------------------------------------------------------------------

def test_softmax_numpy_and_stability():
    x = _rand(3, 4, 5) * 3
    for dim in (0, 1, -1):
        np.testing.assert_allclose(flow.softmax(_t(x), dim).numpy(), _softmax_ref(x, dim),
                                   atol=1e-12)
        np.testing.assert_allclose(flow.log_softmax(_t(x), dim).numpy(),
                                   np.log(_softmax_ref(x, dim)), atol=1e-12)
    big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1e6]])
    y = flow.softmax(_t(big), dim=1).numpy()
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, _softmax_ref(big, 1), atol=1e-12)
    assert np.isfinite(flow.log_softmax(_t(big), dim=1).numpy()).all()


def test_softmax_methods_dtype_and_implicit_dim():
    x = _t(_rand(2, 3))
    np.testing.assert_allclose(x.softmax(1).numpy(), _softmax_ref(x.numpy(), 1), atol=1e-12)
    np.testing.assert_allclose(x.log_softmax(dim=0).numpy(),
                               np.log(_softmax_ref(x.numpy(), 0)), atol=1e-12)
    assert flow.softmax(x, 1, dtype=flow.float32).dtype == flow.float32
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = flow.softmax(x)
    np.testing.assert_allclose(y.numpy(), _softmax_ref(x.numpy(), 1), atol=1e-12)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_vs_torch(name, dim, dtype, tol):
    _vs_torch(lambda x: getattr(flow, name)(x, dim),
              lambda x: getattr(torch.nn.functional, name)(x, dim),
              [(_rand(3, 4, 5) * 2).astype(dtype)], tol)


def test_softmax_gradcheck_and_double_backward():
    gradcheck(lambda x: flow.softmax(x, 1), _rand(2, 4))
    gradcheck(lambda x: flow.log_softmax(x, 0), _rand(3, 2))
    y = flow.softmax(_t(_rand(2, 4)), 1).numpy()
    gradcheck(lambda g, y: flow.softmax_grad(g, y, 1), _rand(2, 4), y)
    y = flow.log_softmax(_t(_rand(2, 4)), 1).numpy()
    gradcheck(lambda g, y: flow.log_softmax_grad(g, y, 1), _rand(2, 4), y)


def test_softmax_errors():
    with pytest.raises(OpError, match="softmax.*out of range"):
        flow.softmax(_t(_rand(2, 3)), 2)
    with pytest.raises(OpError, match="floating point"):
        flow.softmax(flow.tensor([1, 2, 3]), 0)


# ---- dropout ------------------------------------------------------------------------------------

def test_dropout_same_seed_same_mask():
    x = _t(np.ones((50, 40)))
    flow.manual_seed(7)
    a = flow.dropout(x, 0.4).numpy()
    flow.manual_seed(7)
    b = flow.dropout(x, 0.4).numpy()
    c = flow.dropout(x, 0.4).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_dropout_expectation_and_scale():
    flow.manual_seed(0)
    p = 0.3
    y = flow.dropout(_t(np.ones(200_000)), p).numpy()
    assert set(np.unique(y)) <= {0.0, 1.0 / (1 - p)}
    assert abs((y == 0).mean() - p) < 0.01
    assert abs(y.mean() - 1.0) < 0.01


def test_dropout_grad_is_mask_times_scale():
    flow.manual_seed(1)
    x = _t(_rand(30, 20) + 5.0, True)  # no zeros in x, so y == 0 exactly where dropped
    y = flow.dropout(x, 0.25)
    g = _rand(30, 20)
    y.backward(flow.tensor(g))
    mask = y.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), g * mask / 0.75, atol=1e-12)
    gradcheck(lambda g, m: flow.dropout_grad(g, m, 2.0), _rand(3, 4), flow.tensor(mask[:3, :4]))


def test_dropout_identity_zero_and_inplace():
    x = _t(_rand(4, 5), True)
    assert flow.dropout(x, 0.0) is x
    assert flow.dropout(x, 0.7, training=False) is x
    y = flow.dropout(x, 1.0)
    assert not y.detach().numpy().any()
    y.sum().backward()
    assert not x.grad.numpy().any()
    data = _rand(6, 7)
    flow.manual_seed(3)
    ref = flow.dropout(_t(data), 0.5).numpy()
    flow.manual_seed(3)
    z = _t(data.copy())
    out = flow.dropout(z, 0.5, inplace=True)
    assert out is z
    np.testing.assert_array_equal(z.numpy(), ref)
    with pytest.raises(ValueError, match="between 0 and 1"):
        flow.dropout(x, 1.5)
    with pytest.raises(OpError, match="floating point"):
        flow.dropout(flow.tensor([1, 2]), 0.5)


# ---- embedding ----------------------------------------------------------------------------------

IDX = np.array([[0, 2, 4], [4, 4, 1]])


def test_embedding_numpy_and_grad_scatter():
    w = _rand(6, 3)
    fw = _t(w, True)
    y = flow.embedding(flow.tensor(IDX), fw, padding_idx=4)
    np.testing.assert_array_equal(y.detach().numpy(), w[IDX])
    g = _rand(2, 3, 3)
    y.backward(flow.tensor(g))
    ref = np.zeros_like(w)
    np.add.at(ref, IDX.ravel(), g.reshape(-1, 3))
    ref[4] = 0  # padding_idx gets no gradient
    np.testing.assert_allclose(fw.grad.numpy(), ref, atol=1e-12)
    gradcheck(lambda w: flow.embedding(flow.tensor(IDX), w), w)
    gradcheck(lambda g: flow.embedding_grad(g, flow.tensor(IDX), 6, None), g)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("kw", [{}, {"padding_idx": -2}, {"scale_grad_by_freq": True}])
def test_embedding_vs_torch(kw):
    _vs_torch(lambda w: flow.embedding(flow.tensor(IDX), w, **kw),
              lambda w: torch.nn.functional.embedding(torch.tensor(IDX), w, **kw),
              [_rand(6, 3)], 1e-12)


@pytest.mark.parametrize("n,num,padding_idx,dtype", [
    (2048, 96, None, np.float32),   # GPT's token embedding: many repeats
    (64, 64, None, np.float32),     # its position embedding: every index once
    (500, 7, 3, np.float64),
    (300, 70_000, 5, np.float32),   # more rows than a 16-bit sort key holds
    (0, 5, 1, np.float32),
])
def test_embedding_grad_sums_repeated_rows(n, num, padding_idx, dtype):
    idx = RNG.integers(0, num, (n,))
    if n >= 300:
        idx[:50] = idx[0]  # one index many times, and the padding index too
        idx[50:60] = 5
    g = RNG.standard_normal((n, 8)).astype(dtype)
    kernel = flow.ops.registry.get("embedding_grad").kernel_cpu
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for scale in (False, True):
        out = np.full((num, 8), np.nan, dtype)
        kernel([g.reshape(-1, 2, 8) if n else g, idx.reshape(-1, 2) if n else idx], [out],
               {"num_weights": num, "padding_idx": padding_idx, "scale_grad_by_freq": scale})
        want = np.zeros((num, 8))
        np.add.at(want, idx, g.astype(np.float64))
        if scale:
            want /= np.maximum(np.bincount(idx, minlength=num), 1)[:, None]
        if padding_idx is not None:
            want[padding_idx] = 0
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_embedding_max_norm_vs_torch():
    w = _rand(6, 3) * 2
    fw, tw = _t(w.copy()), to_torch(w.copy())
    y = flow.embedding(flow.tensor(IDX), fw, max_norm=1.5)
    ty = torch.nn.functional.embedding(torch.tensor(IDX), tw, max_norm=1.5)
    np.testing.assert_allclose(y.numpy(), ty.numpy(), atol=1e-12)
    np.testing.assert_allclose(fw.numpy(), tw.numpy(), atol=1e-12)  # renormed in place
    np.testing.assert_array_equal(fw.numpy()[[3, 5]], w[[3, 5]])  # unused rows untouched


def test_embedding_errors():
    w = _t(_rand(6, 3))
    with pytest.raises(RuntimeError, match="index 6 is out of range"):
        flow.embedding(flow.tensor([1, 6]), w).numpy()  # kernel errors surface at a sync
    with pytest.raises(OpError, match="integer"):
        flow.embedding(flow.tensor([1.0]), w)
    with pytest.raises(ValueError, match="padding_idx"):
        flow.embedding(flow.tensor([1]), w, padding_idx=9)
    # PyTorch and OneFlow assert: the error is an AssertionError too, from both entry points
    for bad in (6, -7):
        with pytest.raises(AssertionError, match="embedding: padding_idx"):
            flow.embedding(flow.tensor([1]), w, padding_idx=bad)
        with pytest.raises(AssertionError, match="Embedding: padding_idx"):
            flow.nn.Embedding(6, 3, padding_idx=bad)
    assert flow.nn.Embedding(6, 3, padding_idx=-6).padding_idx == 0


# ---- scaled dot-product attention ---------------------------------------------------------------

def _sdpa_ref(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ np.swapaxes(k, -1, -2)) * (scale or 1 / math.sqrt(q.shape[-1]))
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return _softmax_ref(s, -1) @ v


def test_sdpa_numpy():
    q, k, v = _rand(2, 3, 4, 5), _rand(2, 3, 6, 5), _rand(2, 3, 6, 2)
    out = flow.scaled_dot_product_attention(_t(q), _t(k), _t(v), is_causal=True)
    np.testing.assert_allclose(out.numpy(), _sdpa_ref(q, k, v, causal=True), atol=1e-12)
    m = _rand(4, 6)
    out = flow.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=_t(m), scale=0.3)
    np.testing.assert_allclose(out.numpy(), _sdpa_ref(q, k, v, m, scale=0.3), atol=1e-12)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("kw", ["causal", "bool", "float", "scale", "none"])
def test_sdpa_vs_torch(kw, dtype, tol):
    masks = {"bool": RNG.random((4, 6)) > 0.3, "float": _rand(2, 1, 4, 6).astype(dtype)}
    opts = {"causal": {"is_causal": True}, "scale": {"scale": 0.25}}.get(kw, {})

    def run(lib, tensor):
        def fn(q, k, v):
            extra = dict(opts)
            if kw in masks:
                extra["attn_mask"] = tensor(masks[kw])
            return lib.scaled_dot_product_attention(q, k, v, **extra)
        return fn
    arrays = [a.astype(dtype) for a in (_rand(2, 3, 4, 5), _rand(2, 3, 6, 5), _rand(2, 3, 6, 5))]
    _vs_torch(run(flow, flow.tensor), run(torch.nn.functional, torch.tensor), arrays, tol)


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
def test_sdpa_fully_masked_row_and_gqa_vs_torch():
    q, k, v = _rand(1, 4, 3, 2), _rand(1, 2, 5, 2), _rand(1, 2, 5, 2)
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out = flow.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=flow.tensor(mask),
                                            enable_gqa=True)
    ref = torch.nn.functional.scaled_dot_product_attention(
        to_torch(q), to_torch(k), to_torch(v), attn_mask=torch.tensor(mask), enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-12)
    assert not out.numpy()[:, :, 1].any()


def test_sdpa_gradcheck_and_dropout():
    mask = flow.tensor(np.tril(np.ones((3, 4), bool), 1))
    gradcheck(lambda q, k, v: flow.scaled_dot_product_attention(q, k, v, attn_mask=mask),
              _rand(1, 3, 2), _rand(1, 4, 2), _rand(1, 4, 3))
    q, k, v = (_t(_rand(2, 4, 3), True) for _ in range(3))
    flow.manual_seed(5)
    a = flow.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    flow.manual_seed(5)
    b = flow.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert not np.allclose(a.detach().numpy(),
                           flow.scaled_dot_product_attention(q, k, v).detach().numpy())
    a.sum().backward()
    assert all(np.isfinite(t.grad.numpy()).all() for t in (q, k, v))


def test_sdpa_errors():
    q = _t(_rand(2, 3, 4))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        flow.scaled_dot_product_attention(q, q, q, attn_mask=flow.tensor(np.ones((3, 3), bool)),
                                          is_causal=True)
    with pytest.raises(ValueError, match="shapes don't fit"):
        flow.scaled_dot_product_attention(q, _t(_rand(2, 3, 5)), q)
