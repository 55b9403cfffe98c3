"""``flow.autocast`` (eager mixed precision on the CPU) against ``torch.autocast("cpu")``: the
dtype each op gives, forward values and gradients of a small MLP and CNN, the region's state
(nesting, re-entrancy, decorator, exceptions, threads, the cache), the CUDA error, and an
nn.Graph traced under autocast against eager autocast."""
import threading

import numpy as np
import pytest
import torch

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.dispatch import autocast as ac_state
from actorflow.ops import registry

pytestmark = pytest.mark.timeout(120)


def _t(a, dtype=np.float32, grad=False):
    return flow.tensor(np.asarray(a, dtype=dtype), requires_grad=grad)


def _close(a, b, tol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.abs(b).max()))
    assert np.abs(a - b).max() <= tol * scale, (np.abs(a - b).max(), scale)


def _np(t):
    return (t.float() if t.dtype in (flow.bfloat16, flow.float16) else t).detach().numpy()


def _tnp(t):
    return t.detach().float().numpy()


# ---- the dtype of each op ------------------------------------------------------------------

def test_op_dtypes_match_torch():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    x4, w4 = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    b3, c3 = rng.standard_normal((2, 4, 5)), rng.standard_normal((2, 5, 3))
    with flow.autocast("cpu"), torch.autocast("cpu", dtype=torch.bfloat16):
        pairs = {
            "matmul": (flow.matmul(_t(a), _t(b)), torch.matmul(torch.tensor(a).float(),
                                                             torch.tensor(b).float())),
            "mm": (flow.mm(_t(a), _t(b)), torch.mm(torch.tensor(a).float(),
                                                 torch.tensor(b).float())),
            "bmm": (flow.bmm(_t(b3), _t(c3)), torch.bmm(torch.tensor(b3).float(),
                                                      torch.tensor(c3).float())),
            "linear": (F.linear(_t(a), _t(b.T)), torch.nn.functional.linear(
                torch.tensor(a).float(), torch.tensor(b.T).float())),
            "conv2d": (F.conv2d(_t(x4), _t(w4)), torch.nn.functional.conv2d(
                torch.tensor(x4).float(), torch.tensor(w4).float())),
            "relu": (F.relu(_t(a)), torch.relu(torch.tensor(a).float())),
            "mse_loss": (F.mse_loss(_t(a), _t(a) * 2), torch.nn.functional.mse_loss(
                torch.tensor(a).float(), torch.tensor(a).float() * 2)),
            "cross_entropy": (F.cross_entropy(_t(a), flow.tensor([0, 1, 2, 3])),
                              torch.nn.functional.cross_entropy(torch.tensor(a).float(),
                                                                torch.tensor([0, 1, 2, 3]))),
            "float64 stays": (flow.matmul(_t(a, np.float64), _t(b, np.float64)),
                              torch.matmul(torch.tensor(a), torch.tensor(b))),
            "created inside": (flow.zeros(3), torch.zeros(3)),
            "argmax": (flow.argmax(_t(a), 1), torch.argmax(torch.tensor(a).float(), 1)),
        }
        mixed = flow.matmul(_t(a), _t(b))  # bfloat16 meets float32: promotion
        tmixed = torch.matmul(torch.tensor(a).float(), torch.tensor(b).float())
        pairs["add (promotion)"] = (mixed + _t(b[:1, :3].repeat(4, 0)),
                                    tmixed + torch.tensor(b[:1, :3].repeat(4, 0)).float())
        pairs["relu of bfloat16"] = (F.relu(mixed), torch.relu(tmixed))
    for name, (f, t) in pairs.items():
        assert f.dtype.name == str(t.dtype).replace("torch.", ""), (name, f.dtype, t.dtype)
        tol = 1e-12 if f.dtype in (flow.float64, flow.int64) else 1e-2
        _close(_np(f), t.detach().to(torch.float64).numpy(), tol)


def test_integer_inputs_are_never_cast():
    idx = flow.tensor([[0, 2], [1, 3]])
    emb = nn.Embedding(4, 3)
    with flow.autocast("cpu"):
        out = emb(idx)
        s = flow.sum(idx)
    assert idx.dtype is flow.int64 and s.dtype is flow.int64
    assert out.dtype is flow.float32  # embedding lookup follows its weight, as torch's


@pytest.mark.parametrize("name,fn", [
    ("softmax", lambda h: F.softmax(h, dim=-1)),
    ("log_softmax", lambda h: F.log_softmax(h, dim=-1)),
    ("layer_norm", lambda h: F.layer_norm(h, (3,))),
    ("sum", lambda h: flow.sum(h)),
    ("exp", lambda h: flow.exp(h)),
])
def test_deny_ops_run_in_float32(name, fn):
    # the records' deny list (the one the graph AMP pass reads); PyTorch's CPU list is
    # shorter (its softmax keeps bfloat16), its CUDA list has these in float32 too
    a = _t(np.arange(12).reshape(4, 3) / 7.0)
    with flow.autocast("cpu"):
        h = flow.matmul(a, _t(np.eye(3)))
        assert h.dtype is flow.bfloat16
        y = fn(h)
    assert y.dtype is flow.float32
    assert registry.get(name).amp == "deny"


def test_allow_list_is_the_records():
    allow = {name for name, op in registry.all_ops().items() if op.amp == "allow"}
    assert {"matmul", "linear", "conv2d"} <= allow


# ---- values and gradients against torch -----------------------------------------------------

def _models():
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 16), torch.nn.Tanh(),
                             torch.nn.Linear(16, 3))
    fm = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                       nn.Linear(4 * 5 * 5, 16), nn.Tanh(), nn.Linear(16, 3))
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, fm


@pytest.mark.parametrize("cache", [True, False])
def test_cnn_forward_and_gradients_match_torch(cache):
    torch.manual_seed(0)
    tm, fm = _models()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2, 5, 5)).astype(np.float32)
    y = rng.integers(0, 3, 6)
    tx, fx = torch.tensor(x, requires_grad=True), _t(x, grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=cache):
        touts = [tx]
        for layer in tm:
            touts.append(layer(touts[-1]))
        tloss = torch.nn.functional.cross_entropy(touts[-1], torch.tensor(y))
    with flow.autocast("cpu", cache_enabled=cache):
        fouts = [fx]
        for layer in fm:
            fouts.append(layer(fouts[-1]))
        floss = F.cross_entropy(fouts[-1], flow.tensor(y))
    for f, t in zip(fouts, touts):
        assert f.dtype.name == str(t.dtype).replace("torch.", "")
        _close(_np(f), _tnp(t), 2e-2)
    assert floss.dtype is flow.float32 and tloss.dtype is torch.float32
    _close(floss.numpy(), tloss.detach().numpy(), 1e-2)
    tloss.backward()
    floss.backward()
    assert fx.grad.dtype is flow.float32
    _close(fx.grad.numpy(), tx.grad.numpy(), 3e-2)
    for (name, tp), fp in zip(tm.named_parameters(), fm.parameters()):
        assert fp.grad.dtype is flow.float32, name  # each leaf's own dtype
        _close(fp.grad.numpy(), tp.grad.numpy(), 3e-2)


def test_half_leaf_gets_its_own_dtype_back():
    a = _t(np.ones((3, 4)), np.float32, grad=True)
    b = flow.tensor(np.ones((4, 2)), dtype=flow.float16, requires_grad=True)
    with flow.autocast("cpu"):
        out = flow.matmul(a, b)
    assert out.dtype is flow.bfloat16
    out.float().sum().backward()
    assert a.grad.dtype is flow.float32 and b.grad.dtype is flow.float16
    np.testing.assert_allclose(b.grad.numpy(), np.full((4, 2), 3.0))


# ---- the region's state -----------------------------------------------------------------------

def _mm_dtype():
    return flow.matmul(_t(np.ones((2, 2))), _t(np.ones((2, 2)))).dtype


def test_defaults_and_setters():
    assert flow.get_autocast_cpu_dtype() is flow.bfloat16
    assert flow.get_autocast_gpu_dtype() is flow.float16
    assert not flow.is_autocast_enabled() and flow.is_autocast_cache_enabled()
    assert flow.amp.autocast is flow.autocast
    flow.set_autocast_cpu_dtype(flow.float16)
    try:
        with flow.autocast("cpu"):
            assert _mm_dtype() is flow.float16
    finally:
        flow.set_autocast_cpu_dtype(flow.bfloat16)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flow.set_autocast_cpu_dtype(flow.float32)
    flow.set_autocast_cache_enabled(False)
    assert not flow.autocast("cpu").cache_enabled
    flow.set_autocast_cache_enabled(True)
    flow.set_autocast_enabled(True)  # device type cuda outside any region: CPU ops untouched
    try:
        assert flow.is_autocast_enabled() and _mm_dtype() is flow.float32
    finally:
        flow.set_autocast_enabled(False)


def test_nesting_disabled_region_and_reentrancy():
    outer = flow.autocast("cpu")
    with outer:
        assert flow.is_autocast_enabled() and _mm_dtype() is flow.bfloat16
        with flow.autocast("cpu", dtype=flow.float16):
            assert _mm_dtype() is flow.float16
            with flow.autocast("cpu", enabled=False):
                assert not flow.is_autocast_enabled() and _mm_dtype() is flow.float32
            assert _mm_dtype() is flow.float16
        assert _mm_dtype() is flow.bfloat16
        assert flow.get_autocast_cpu_dtype() is flow.bfloat16
        with outer:  # the same object again while it is open
            assert _mm_dtype() is flow.bfloat16
        assert flow.is_autocast_enabled()
    assert not flow.is_autocast_enabled() and _mm_dtype() is flow.float32
    assert ac_state.state.nesting == 0 and not ac_state.state.cache


def test_decorator_and_recursion():
    @flow.autocast("cpu")
    def f(n):
        d = _mm_dtype()
        return [d] + (f(n - 1) if n else [])

    assert f(3) == [flow.bfloat16] * 4
    assert not flow.is_autocast_enabled()

    @flow.autocast("cpu", enabled=False)
    def g():
        return _mm_dtype()

    with flow.autocast("cpu"):
        assert g() is flow.float32 and _mm_dtype() is flow.bfloat16


def test_exception_restores_state():
    with pytest.raises(KeyError):
        with flow.autocast("cpu"):
            with flow.autocast("cpu", dtype=flow.float16):
                raise KeyError("x")
    assert not flow.is_autocast_enabled() and _mm_dtype() is flow.float32
    assert ac_state.state.nesting == 0 and not ac_state.state.saved

    @flow.autocast("cpu")
    def bad():
        raise ValueError("y")

    with pytest.raises(ValueError):
        bad()
    assert not flow.is_autocast_enabled()


def test_state_is_per_thread():
    seen = {}
    go, done = threading.Event(), threading.Event()

    def other():
        go.wait(10)
        seen["enabled"] = flow.is_autocast_enabled()
        seen["plain"] = _mm_dtype()
        with flow.autocast("cpu", dtype=flow.float16):
            seen["own"] = _mm_dtype()
            done.set()

    th = threading.Thread(target=other)
    th.start()
    with flow.autocast("cpu"):
        go.set()
        assert done.wait(10)
        assert _mm_dtype() is flow.bfloat16  # the other thread's region left this one alone
    th.join(10)
    assert seen == {"enabled": False, "plain": flow.float32, "own": flow.float16}


def test_cuda_and_bad_arguments():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        flow.autocast("cuda")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        flow.autocast("cuda", dtype=flow.bfloat16, enabled=True)
    with flow.autocast("cpu"):
        with flow.autocast("cuda", enabled=False):  # allowed: a region that turns casting off
            assert _mm_dtype() is flow.float32
    with pytest.raises(RuntimeError, match="'cuda' or 'cpu'"):
        flow.autocast("xpu")
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        flow.autocast("cpu", dtype=flow.float32)
    assert not flow.is_autocast_enabled()


# ---- the cache ----------------------------------------------------------------------------------

def test_cache_reuses_a_leaf_cast_and_follows_writes():
    lin = nn.Linear(3, 2)
    x = _t(np.ones((1, 3)))
    with flow.autocast("cpu"):
        a = lin(x)
        b = lin(x)
        assert len(ac_state.state.cache) == 2  # weight and bias, cast once each
        casts = [v[2] for v in ac_state.state.cache.values()]
        lin(x)
        assert [v[2] for v in ac_state.state.cache.values()] == casts  # reused
        with flow.no_grad():
            lin.weight.add_(1.0)  # a write: the next use casts again
        c = lin(x)
        np.testing.assert_allclose(_np(c) - _np(a), np.full((1, 2), 3.0), atol=2e-2)
        flow.clear_autocast_cache()
        assert not ac_state.state.cache
        with flow.no_grad():
            lin(x)  # no autograd history wanted: not cached
        assert not ac_state.state.cache
    assert not ac_state.state.cache  # the outermost region's end clears it
    (a.float().sum() + b.float().sum()).backward()
    np.testing.assert_allclose(lin.bias.grad.numpy(), [2.0, 2.0])
    with flow.autocast("cpu", cache_enabled=False):
        lin(x)
        assert not ac_state.state.cache


# ---- nn.Graph ------------------------------------------------------------------------------------

class _Train(nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        with flow.autocast("cpu"):
            out = self.model(x)
            loss = F.cross_entropy(out, y)
        loss.backward()
        return loss, out


def _mlp():
    flow.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    return m, flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


def test_graph_trained_under_autocast_matches_eager():
    rng = np.random.default_rng(2)
    data = [(_t(rng.standard_normal((8, 6))), flow.tensor(rng.integers(0, 3, 8)))
            for _ in range(3)]
    gm, gopt = _mlp()
    graph = _Train(gm, gopt)
    em, eopt = _mlp()
    for x, y in data:
        gloss, gout = graph(x, y)
        with flow.autocast("cpu"):
            eout = em(x)
            eloss = F.cross_entropy(eout, y)
        eopt.zero_grad()
        eloss.backward()
        eopt.step()
        assert gout.dtype is flow.bfloat16 and gloss.dtype is flow.float32
        _close(_np(gout), _np(eout), 1e-2)
        _close(gloss.numpy(), eloss.numpy(), 1e-4)
    traced = graph.__dict__["_last"].forward_job  # the casts are ops of the traced Job
    cast_to = {o.attrs["dtype"] for o in traced.ops if o.op_type == "cast"}
    assert flow.bfloat16 in cast_to and flow.float32 in cast_to
    for gp, ep in zip(gm.parameters(), em.parameters()):
        assert gp.dtype is flow.float32
        _close(gp.numpy(), ep.numpy(), 1e-3)
    assert not flow.is_autocast_enabled()


class _Linear(nn.Graph):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 4, bias=False)

    def build(self, x):
        return self.linear(x)


def test_graph_traced_inside_a_region():
    # OneFlow's test_autocast_graph on the CPU: the first call (the trace) runs in the region
    x = _t(np.ones((3, 3)))
    with flow.autocast("cpu"):
        graph = _Linear()
        assert graph(x).dtype is flow.bfloat16
    assert graph(x).dtype is flow.bfloat16  # the compiled Plan keeps its casts


def test_ops_sent_to_another_worker_are_cast_at_dispatch():
    worker = flow.asyncs.Thread()
    x = _t(np.ones((2, 3)))
    w = _t(np.ones((4, 3)), grad=True)
    with flow.autocast("cpu"), flow.asyncs.thread(worker):
        y = F.linear(x, w)  # issued to the worker; cast here, on this thread
        loss = F.mse_loss(y, flow.zeros(2, 4))
    assert y.dtype is flow.bfloat16 and loss.dtype is flow.float32
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), np.full((4, 3), 1.5), rtol=1e-2)  # 2 * 2y/8


def test_backward_inside_the_region_and_float16_with_grad_scaler():
    def grads(inside):
        flow.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
        x, y = flow.randn(5, 6), flow.tensor([0, 1, 2, 1, 0])
        with flow.autocast("cpu"):
            loss = F.cross_entropy(m(x), y)
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        return [p.grad.numpy() for p in m.parameters()]

    for a, b in zip(grads(False), grads(True)):
        _close(a, b, 1e-2)

    flow.manual_seed(1)
    m = nn.Linear(4, 2)
    opt = flow.optim.SGD(m.parameters(), lr=0.1)
    scaler = flow.amp.GradScaler(init_scale=256.0)
    x = flow.randn(3, 4)
    before = m.weight.numpy().copy()
    with flow.autocast("cpu", dtype=flow.float16):
        out = m(x)
        loss = out.float().pow(2).mean()
    assert out.dtype is flow.float16
    scaler.scale(loss).backward()
    assert m.weight.grad.dtype is flow.float32
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 256.0 and not np.array_equal(before, m.weight.numpy())
