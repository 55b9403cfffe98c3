"""float16 / bfloat16 reductions, scans and accumulating kernels sum in float32 and round once
(as PyTorch does): summing thousands of values in half precision stalls (bfloat16 0.1 + 0.1 + ...
stops growing at 32). Each case compares with PyTorch on the same half-precision values, in
eager mode and inside an nn.Graph; gradients that sum (broadcast, bias, scatter-add) are
compared with a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn.functional as AF
from tests.helpers import FnGraph, torch

pytestmark = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

HALF = [(flow.float16, "float16", 2.0 ** -9), (flow.bfloat16, "bfloat16", 2.0 ** -6)]
rng = np.random.default_rng(0)
POS = (rng.random((64, 3000)) * 0.1 + 0.05).astype(np.float32)  # positive: errors add up
POS_T = np.ascontiguousarray(POS.T)
FACTORS = POS * 0.2 + 0.99  # products of 500 of them stay in float16's normal range

FORWARD = {
    "sum": (lambda x: x.sum(), POS),
    "sum_dim_last": (lambda x: x.sum(1), POS),
    "sum_dim_first": (lambda x: x.sum(0), POS_T),
    "sum_dims_keepdim": (lambda x: x.sum((0, 1), keepdim=True), POS),
    "sum_1d": (lambda x: x.sum(0), POS.reshape(-1)),
    "mean": (lambda x: x.mean(0), POS_T),
    "cumsum": (lambda x: x.cumsum(0), POS.reshape(-1)[:50000]),
    "cumsum_dim1": (lambda x: x.cumsum(1), POS),
    "prod": (lambda x: x.prod(), FACTORS.reshape(-1)[:500]),
    "prod_dim": (lambda x: x.prod(1), FACTORS[:, :500]),
    "cumprod": (lambda x: x.cumprod(0), FACTORS.reshape(-1)[:500]),
}


def _ref(fn, a, tdtype):
    """PyTorch on the same half values (it accumulates in float32 too), and in float64."""
    th = torch.tensor(a).to(tdtype)
    return fn(th).float().numpy(), fn(th.double()).numpy()


@pytest.mark.parametrize("name", sorted(FORWARD))
@pytest.mark.parametrize("dtype,tname,tol", HALF, ids=["float16", "bfloat16"])
def test_half_reductions_match_pytorch(name, dtype, tname, tol):
    fn, a = FORWARD[name]
    want, exact = _ref(fn, a, getattr(torch, tname))
    got = fn(flow.tensor(a, dtype=dtype))
    assert got.dtype is dtype
    got = got.numpy().astype(np.float64)
    if not name.startswith("prod"):  # PyTorch's CPU prod of half values multiplies in half
        np.testing.assert_allclose(got, want, rtol=tol, atol=0)
    np.testing.assert_allclose(got, exact, rtol=tol, atol=0)


@pytest.mark.parametrize("dtype,tname,tol", HALF, ids=["float16", "bfloat16"])
def test_bfloat16_issue_reproducer_and_graph(dtype, tname, tol):
    x = flow.ones(5000, dtype=dtype) * 0.1
    want = (torch.ones(5000, dtype=getattr(torch, tname)) * 0.1).sum().float().item()
    assert x.sum().float().item() == pytest.approx(want, rel=tol)
    assert abs(want - 500) < 500 * tol
    graph = FnGraph(lambda t: (t.sum(), t.cumsum(0), t.sum(0, dtype=flow.float32)))
    total, running, wide = graph(x)
    assert total.dtype is dtype and running.dtype is dtype
    # read through numpy(): a sync point (see the report on eager ops on graph outputs)
    np.testing.assert_allclose(total.numpy().astype(np.float64), want, rtol=tol)
    np.testing.assert_allclose(running.numpy().astype(np.float64)[-1], want, rtol=tol)
    np.testing.assert_allclose(wide.numpy(), x.numpy().astype(np.float64).sum(), rtol=1e-6)


def _grads(fn, arrays, dtype):
    """(actorflow's half gradients, float64 gradients of the same values) of
    ``(fn(nnf, *inputs) * r).sum()`` for a fixed random ``r`` (``nnf``: the library's
    nn.functional)."""
    ins = [flow.tensor(a, dtype=dtype, requires_grad=True) if a.dtype.kind == "f"
           else flow.tensor(a) for a in arrays]
    ref = [torch.tensor(flow.tensor(a, dtype=dtype).double().numpy(), requires_grad=True)
           if a.dtype.kind == "f" else torch.tensor(a) for a in arrays]
    out = fn(AF, *ins)
    r = np.random.default_rng(1).standard_normal(tuple(out.shape))
    (out * flow.tensor(r, dtype=dtype)).sum().backward()
    (fn(torch.nn.functional, *ref) * torch.tensor(r)).sum().backward()
    return ([t.grad.float().numpy() for t in ins if t.dtype.is_floating_point],
            [t.grad.numpy() for t in ref if t.dtype.is_floating_point])


V = (rng.random(20000) * 0.8 + 0.1).astype(np.float32)
IDX = rng.integers(0, 4, 20000)
GRADS = {  # functions without intermediate roundings, so float64 is the exact reference
    "expand": (lambda nnf, x: x.expand(20000, 4), [V[:4]]),
    "broadcast_add_dim0": (lambda nnf, a, b: a + b, [POS_T, V[:64]]),
    "broadcast_add_scalar_tensor": (lambda nnf, a, b: a + b, [POS, V[:1]]),
    "linear_bias": (lambda nnf, x, w, b: nnf.linear(x, w, b),
                    [POS_T[:, :8].copy(), V[:24].reshape(3, 8), V[:3]]),
    "repeat": (lambda nnf, x: x.repeat(5000, 1), [V[:4]]),
    "cumsum": (lambda nnf, x: x.cumsum(0), [V]),
    "cumprod": (lambda nnf, x: x.cumprod(0), [FACTORS.reshape(-1)[:200]]),
    "gather": (lambda nnf, x, i: x.gather(0, i), [V[:4], IDX]),
    "getitem_repeated_index": (lambda nnf, x, i: x[i], [V[:4], IDX]),
    "index_select": (lambda nnf, x, i: x.index_select(0, i), [V[:4], IDX]),
    "pad_replicate": (lambda nnf, x: nnf.pad(x, (0, 3000), mode="replicate"),
                      [POS[None, :2, :5]]),
}


@pytest.mark.parametrize("name", sorted(GRADS))
@pytest.mark.parametrize("dtype,tname,tol", HALF, ids=["float16", "bfloat16"])
def test_half_gradients_sum_in_float32(name, dtype, tname, tol):
    fn, arrays = GRADS[name]
    got, exact = _grads(fn, arrays, dtype)
    for g, e in zip(got, exact):
        # the rounding of each summed value and of the incoming gradient
        np.testing.assert_allclose(g, e, rtol=2 * tol, atol=2 * tol * np.abs(e).max())


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16], ids=["float16", "bfloat16"])
def test_half_gradient_sums_inside_graph(dtype):
    def grad_of_broadcast(x):
        y = x.expand(20000, 4) * 1.0
        return flow.autograd.grad(y.sum(), x)[0]

    x = flow.tensor(np.full(4, 0.1), dtype=dtype, requires_grad=True)
    eager = grad_of_broadcast(x)
    graph = FnGraph(grad_of_broadcast)(x)
    want = float(flow.tensor(20000.0, dtype=dtype).float().item())  # 20000 rounded once
    np.testing.assert_array_equal(eager.float().numpy(), want)
    np.testing.assert_array_equal(graph.numpy().astype(np.float64), want)


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16], ids=["float16", "bfloat16"])
def test_half_index_add_and_scatter_add_accumulate_in_float32(dtype):
    n = 4096
    src = flow.full((n,), 0.1, dtype=dtype)
    idx = flow.zeros(n, dtype=flow.int64)
    want = float(flow.tensor(0.1, dtype=dtype).float().item()) * n
    tol = 2.0 ** -8 if dtype is flow.float16 else 2.0 ** -6
    added = flow.zeros(2, dtype=dtype).index_add(0, idx, src)
    scattered = flow.zeros(2, dtype=dtype).scatter_add(0, idx, src)
    for t in (added, scattered):
        assert t.dtype is dtype
        np.testing.assert_allclose(t.float().numpy(), [want, 0], rtol=tol)


def test_linear_with_bias_rounds_once_in_half():
    # x @ w.T = 2048.75 rounds to 2048 in float16 (spacing 2 there); adding the bias 0.5 to
    # that gives 2048.5 -> 2048, while the exact 2049.25 rounds to 2050
    x = flow.tensor([[2048.0, 0.75]], dtype=flow.float16)
    w = flow.tensor([[1.0, 1.0]], dtype=flow.float16)
    b = flow.tensor([0.5], dtype=flow.float16)
    assert AF.linear(x, w, b).numpy().tolist() == [[2050.0]]
    want = torch.nn.functional.linear(*(torch.tensor(t.numpy()) for t in (x, w, b)))
    assert want.tolist() == [[2050.0]]


def test_bfloat16_probability_targets_and_padded_max_pool():
    logits = rng.standard_normal((8, 5)).astype(np.float32)
    probs = np.abs(logits) / np.abs(logits).sum(1, keepdims=True)
    x, y = flow.tensor(logits, dtype=flow.bfloat16), flow.tensor(probs, dtype=flow.bfloat16)
    want = torch.nn.functional.cross_entropy(torch.tensor(logits).bfloat16(),
                                             torch.tensor(probs).bfloat16())
    np.testing.assert_allclose(AF.cross_entropy(x, y).float().item(), want.float().item(),
                               rtol=2.0 ** -6)
    img = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    pooled = AF.max_pool2d(flow.tensor(img, dtype=flow.bfloat16), 3, 1, 1)
    tp = torch.nn.functional.max_pool2d(torch.tensor(img).bfloat16(), 3, 1, 1)
    np.testing.assert_array_equal(pooled.float().numpy(), tp.float().numpy())
