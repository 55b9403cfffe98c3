"""The fused scaled_dot_product_attention op and its fused gradient op: values against NumPy
and PyTorch, gradients against finite differences, double backward, and nn.Graph runs."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.ops import OpError
from tests.helpers import gradcheck, to_torch

RNG = np.random.default_rng(11)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _t(a, grad=False):
    return flow.tensor(a, requires_grad=grad)


def _ref(q, k, v, mask=None, causal=False, scale=None):
    """Attention in float64 NumPy; rows with no allowed key give zeros."""
    s = (q @ np.swapaxes(k, -1, -2)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(m), 0, m))
    tot = e.sum(axis=-1, keepdims=True)
    return (e / np.where(tot == 0, 1, tot)) @ v


def _partial_mask(*shape):
    m = RNG.random(shape) > 0.4
    m[..., 1, :] = False  # one fully masked query row
    return m


CASES = {
    "plain": (((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)), {}),
    "causal": (((2, 3, 6, 5), (2, 3, 6, 5), (2, 3, 6, 4)), {"causal": True}),
    "causal_L_lt_S": (((2, 4, 5), (2, 7, 5), (2, 7, 3)), {"causal": True}),
    "causal_L_gt_S": (((2, 7, 5), (2, 4, 5), (2, 4, 3)), {"causal": True}),
    "scale": (((3, 4, 5), (3, 6, 5), (3, 6, 5)), {"scale": 0.3}),
    "bool_mask": (((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)), {"mask": _partial_mask(4, 6)}),
    "float_mask": (((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2)), {"mask": _rand(2, 1, 4, 6)}),
    "broadcast_batch": (((2, 3, 4, 5), (3, 6, 5), (1, 3, 6, 2)), {"causal": True}),
    "mask_widens_batch": (((3, 4, 5), (3, 6, 5), (3, 6, 2)), {"mask": _rand(2, 3, 4, 1)}),
    "value_widens_batch": (((3, 4, 5), (3, 6, 5), (2, 3, 6, 2)), {"mask": _rand(4, 6)}),
    "two_dim": (((4, 5), (6, 5), (6, 3)), {"mask": _partial_mask(4, 6)}),
}


def _call(q, k, v, mask=None, causal=False, scale=None):
    return flow.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                             scale=scale)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_forward_matches_numpy(case, dtype, tol):
    shapes, kw = CASES[case]
    q, k, v = (_rand(*s) for s in shapes)
    mask = kw.get("mask")
    fmask = None
    if mask is not None:
        fmask = flow.tensor(mask if mask.dtype == bool else mask.astype(dtype))
    out = _call(*(_t(a.astype(dtype)) for a in (q, k, v)), mask=fmask,
                causal=kw.get("causal", False), scale=kw.get("scale"))
    ref = _ref(q, k, v, mask, kw.get("causal", False), kw.get("scale"))
    assert out.dtype == flow.tensor(np.zeros(1, dtype)).dtype
    assert tuple(out.shape) == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)
    if case in ("bool_mask", "two_dim"):
        assert not out.numpy()[..., 1, :].any()  # the fully masked row gives zeros


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("spread", [1.0, 40.0, 1e4])
def test_softmax_with_and_without_the_row_max_shift(causal, dtype, tol, spread):
    # scores within +-64 skip the shift by the row maximum; larger ones (40 * ~|q||k|) and
    # scores whose exp overflows float32 take the shifted path: both give the softmax
    q, k, v = _rand(2, 3, 5, 4) * spread, _rand(2, 3, 6, 4), _rand(2, 3, 6, 3)
    out = _call(*(_t(a.astype(dtype)) for a in (q, k, v)), causal=causal)
    ref = _ref(q.astype(dtype).astype(np.float64), k.astype(dtype).astype(np.float64), v,
               causal=causal)
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)
    assert np.isfinite(out.numpy()).all()


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16])
def test_half_precision_computes_in_float32(dtype):
    q, k, v = _rand(2, 3, 8, 4), _rand(2, 3, 8, 4), _rand(2, 3, 8, 4)
    ts = [_t(a.astype(np.float32)).to(dtype).requires_grad_() for a in (q, k, v)]
    out = flow.scaled_dot_product_attention(*ts, is_causal=True)
    assert out.dtype == dtype
    rounded = [t.detach().float().numpy().astype(np.float64) for t in ts]
    np.testing.assert_allclose(out.float().numpy(), _ref(*rounded, causal=True),
                               atol=2e-2 if dtype == flow.bfloat16 else 3e-3)
    out.sum().backward()
    assert all(t.grad.dtype == dtype and np.isfinite(t.grad.float().numpy()).all()
               for t in ts)


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradients_match_finite_differences(case):
    shapes, kw = CASES[case]
    arrays = [_rand(*s) for s in shapes]
    mask = kw.get("mask")
    if mask is not None and mask.dtype != bool:  # the additive mask gets a gradient too
        gradcheck(lambda q, k, v, m: _call(q, k, v, m, scale=kw.get("scale")),
                  *arrays, mask.copy())
    else:
        fmask = None if mask is None else flow.tensor(mask)
        gradcheck(lambda q, k, v: _call(q, k, v, fmask, kw.get("causal", False),
                                        kw.get("scale")), *arrays)


@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask", "broadcast_batch",
                                  "scale", "causal_L_gt_S"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_forward_and_grads_match_torch(case, dtype, tol):
    torch = pytest.importorskip("torch")
    shapes, kw = CASES[case]
    arrays = [_rand(*s).astype(dtype) for s in shapes]
    mask = kw.get("mask")
    if mask is not None and mask.dtype != bool:
        mask = mask.astype(dtype)
    fa = [_t(a, True) for a in arrays]
    ta = [to_torch(a, True) for a in arrays]
    fm = tm = None
    if mask is not None:
        grad = mask.dtype != bool
        fm, tm = _t(mask, grad), to_torch(mask, grad)
    y = flow.scaled_dot_product_attention(*fa, attn_mask=fm, is_causal=kw.get("causal", False),
                                          scale=kw.get("scale"))
    ty = torch.nn.functional.scaled_dot_product_attention(
        *ta, attn_mask=tm, is_causal=kw.get("causal", False), scale=kw.get("scale"))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    g = _rand(*ty.shape).astype(dtype)
    y.backward(flow.tensor(g))
    ty.backward(to_torch(g))
    pairs = list(zip(fa, ta)) + ([(fm, tm)] if fm is not None and fm.requires_grad else [])
    for a, t in pairs:
        assert a.grad.dtype == a.dtype
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol * 10)


def _grads_of(fn):
    """``fn``'s first-order gradients as a differentiable function of its inputs (it also runs
    under gradcheck's no_grad: inputs that don't require grad become leaves that do)."""
    def grads(*ts):
        with flow.enable_grad():
            ts = [t if t.requires_grad else t.detach().requires_grad_() for t in ts]
            return flow.autograd.grad(fn(*ts), ts, create_graph=True)
    return grads


def test_double_backward():
    w = np.linspace(-1, 1, 2 * 4 * 2).reshape(2, 4, 2)
    gradcheck(_grads_of(lambda q, k, v, m: (flow.scaled_dot_product_attention(
        q, k, v, attn_mask=m) * flow.tensor(w)).sum()),
        _rand(2, 4, 3), _rand(2, 6, 3), _rand(2, 6, 2), _rand(4, 6))
    gradcheck(_grads_of(lambda q, k, v: flow.scaled_dot_product_attention(
        q, k, v, is_causal=True).square().sum()), _rand(2, 5, 3), _rand(2, 5, 3), _rand(2, 5, 2))


def test_double_backward_matches_torch():
    torch = pytest.importorskip("torch")
    arrays = [_rand(2, 3, 5, 4) for _ in range(3)]
    fa = [_t(a, True) for a in arrays]
    ta = [to_torch(a, True) for a in arrays]
    fq, = flow.autograd.grad(flow.scaled_dot_product_attention(*fa, is_causal=True)
                             .square().sum(), [fa[0]], create_graph=True)
    # torch's fused CPU kernels have no double backward: its math formulation is the reference
    scores = ta[0] @ ta[1].transpose(-1, -2) / 2.0
    scores = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf)
    ty = torch.softmax(scores, dim=-1) @ ta[2]
    tq, = torch.autograd.grad(ty.square().sum(), [ta[0]], create_graph=True)
    (fq * fq).sum().backward()
    (tq * tq).sum().backward()
    for a, t in zip(fa, ta):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_one_fused_op_each_way():
    q, k, v = (_t(_rand(2, 4, 3), True) for _ in range(3))
    y = flow.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert y.grad_fn.op.name == "scaled_dot_product_attention"
    assert all(e[0] is t for e, t in zip(y.grad_fn.next_edges, (q, k, v)))  # leaves directly
    y.sum().backward()
    assert all(t.grad is not None for t in (q, k, v))


def test_dropout_keeps_the_composite_path():
    # (dropout's values and gradients are tested in tests/ops/test_nn.py)
    q, k, v = (_t(_rand(2, 4, 3), True) for _ in range(3))
    sdpa = flow.scaled_dot_product_attention
    assert sdpa(q, k, v, dropout_p=0.5).grad_fn.op.name == "matmul"
    assert sdpa(q, k, v).grad_fn.op.name == "scaled_dot_product_attention"


def test_grad_of_only_some_inputs_and_no_grad():
    q, k, v = _t(_rand(2, 4, 3), True), _t(_rand(2, 5, 3)), _t(_rand(2, 5, 2), True)
    y = flow.scaled_dot_product_attention(q, k, v)
    y.sum().backward()
    assert k.grad is None and q.grad is not None and v.grad is not None
    with flow.no_grad():
        z = flow.scaled_dot_product_attention(q, k, v)
    assert not z.requires_grad
    np.testing.assert_allclose(z.numpy(), y.detach().numpy())


def test_empty_keys_and_queries():
    q, k, v = _t(_rand(2, 3, 4), True), _t(np.zeros((2, 0, 4)), True), _t(np.zeros((2, 0, 5)))
    y = flow.scaled_dot_product_attention(q, k, v)
    assert tuple(y.shape) == (2, 3, 5) and not y.numpy().any()
    y.sum().backward()
    assert not q.grad.numpy().any() and tuple(k.grad.shape) == (2, 0, 4)
    y = flow.scaled_dot_product_attention(_t(np.zeros((2, 0, 4))), _t(_rand(2, 3, 4)),
                                          _t(_rand(2, 3, 5)), is_causal=True)
    assert tuple(y.shape) == (2, 0, 5)


def test_errors_name_the_op_and_shapes():
    q = _t(_rand(2, 3, 4))
    with pytest.raises(OpError, match="scaled_dot_product_attention: mask must broadcast"):
        flow.scaled_dot_product_attention(q, q, q, attn_mask=_t(_rand(2, 3)))
    with pytest.raises(OpError, match="cannot be broadcast"):
        flow.scaled_dot_product_attention(q, _t(_rand(5, 3, 4)), _t(_rand(5, 3, 4)))
    with pytest.raises(OpError, match="floating point"):
        flow.scaled_dot_product_attention(flow.tensor(np.ones((3, 4), np.int64)), q, q)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        flow.scaled_dot_product_attention(q, q, q, attn_mask=_t(_rand(3, 3)), is_causal=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        flow.scaled_dot_product_attention(q, q, q, dropout_p=-0.1)


# ---- nn.Graph ----------------------------------------------------------------------------------

class _Attention(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.causal = causal

    def forward(self, x, mask=None):
        q, k, v = (t.reshape(2, 5, 2, 4).transpose(1, 2) for t in self.qkv(x).split(8, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
        return y.transpose(1, 2).reshape(2, 5, 8)


class _TrainGraph(nn.Graph):
    """Trains ``model(x, mask).square().mean()`` with ``opt`` (under AMP when ``amp``); the
    mask, if any, is passed with each call."""

    def __init__(self, model, opt, amp=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if amp is not None:
            self.config.enable_amp(True, dtype=amp)

    def build(self, x, *mask):
        loss = self.model(x, *(mask or (None,))).square().mean()
        loss.backward()
        return loss


@pytest.mark.parametrize("executor", ["reference", "runtime"])
@pytest.mark.parametrize("causal", [True, False])
def test_graph_training_matches_eager(executor, causal, monkeypatch):
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    flow.manual_seed(0)
    model = _Attention(causal)
    ref = _Attention(causal)
    ref.load_state_dict(model.state_dict())
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = flow.optim.SGD(ref.parameters(), lr=0.1)
    mask = None if causal else flow.tensor(_rand(5, 5).astype(np.float32))

    g = _TrainGraph(model, opt)
    for step in range(3):
        x = flow.tensor(np.random.default_rng(step).standard_normal((2, 5, 8)).astype(np.float32))
        loss = g(x, *([] if mask is None else [mask]))
        ref_loss = ref(x, mask).square().mean()
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.numpy(), ref_loss.numpy(), rtol=1e-6)
    for p, r in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.numpy(), r.numpy(), rtol=1e-6, atol=1e-7)
    types = [o.op_type for o in g.full_job.ops]
    assert types.count("scaled_dot_product_attention") == 1
    assert types.count("scaled_dot_product_attention_grad") == 1
    assert "softmax" not in types and "softmax_grad" not in types


def test_batch_slices_on_intra_op_threads_match_one_thread():
    from actorflow.ops import parallel
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((8, 4, 128, 16)).astype(np.float32) for _ in range(3))
    dout = rng.standard_normal((8, 4, 128, 16)).astype(np.float32)
    results = []
    before = parallel.threads()
    for n in (1, 2):
        parallel.set_threads(n)
        try:
            tq, tk, tv = (_t(a, grad=True) for a in (q, k, v))
            y = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            y.backward(_t(dout))
            results.append([y.numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()])
        finally:
            parallel.set_threads(before)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("amp", ["float16", "bfloat16"])
def test_amp_graph_runs_attention_in_float32(amp):
    flow.manual_seed(0)
    model = _Attention(True)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    g = _TrainGraph(model, opt, amp=getattr(flow, amp))
    losses = [float(g(flow.tensor(np.random.default_rng(s).standard_normal((2, 5, 8))
                                  .astype(np.float32))).numpy()) for s in range(3)]
    assert all(np.isfinite(losses))
    job = g.full_job
    for conf in job.ops:
        if conf.op_type.startswith("scaled_dot_product_attention"):
            assert {job.blob_desc(b).dtype for b in conf.inputs} == {flow.float32}, conf.op_type
