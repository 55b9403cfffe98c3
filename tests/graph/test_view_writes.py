"""In-place writes through views inside ``nn.Graph.build`` reach the viewed tensor, as eagerly
(views share memory): values, gradients through the written base and a training step compared
with PyTorch and with eager mode, on both graph executors (``actorflow/dispatch/lazy_views.py``;
eagerly ``actorflow/dispatch/copy_slices.py``)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import actorflow as flow
import actorflow.nn as nn

EXECUTORS = ["reference"] + (["runtime"] if importlib.util.find_spec("actorflow.runtime")
                             else [])

# view kinds: the same code runs on actorflow and torch tensors of shape (4, 6)
VIEWS = {
    "column": lambda y: y[:, 0],
    "rows": lambda y: y[1:],
    "step": lambda y: y[:, ::2],
    "select": lambda y: y.select(1, 2),
    "narrow": lambda y: y.narrow(1, 1, 3),
    "view": lambda y: y.view(6, 4),
    "reshape": lambda y: y.reshape(24),
    "transpose": lambda y: y.transpose(0, 1),
    "permute": lambda y: y.permute(1, 0),
    "unsqueeze": lambda y: y.unsqueeze(1),
    "squeeze": lambda y: y[2:3].squeeze(0),
    "split": lambda y: y.split(2, dim=1)[1],
    "chunk": lambda y: y.chunk(2, 0)[1],
    "diagonal": lambda y: y.diagonal(),
    "none": lambda y: y[None, 1:3, 2],
    "chain": lambda y: y.transpose(0, 1)[1:5].narrow(1, 1, 2).select(1, 0),
}

# torch refuses in-place writes into the pieces of split / chunk under autograd: the same
# elements as a narrow
TORCH_VIEWS = dict(VIEWS, split=lambda y: y.narrow(1, 2, 2), chunk=lambda y: y.narrow(0, 2, 2))

# in-place writes: on the view v (z: a tensor of v's shape computed from the input)
WRITES = {
    "mul_": lambda v, z: v.mul_(2),
    "iadd": lambda v, z: v.__iadd__(z),
    "fill_": lambda v, z: v.fill_(0.5),
    "copy_": lambda v, z: v.copy_(z * 3),
    "relu_": lambda v, z: v.relu_(),
    "setitem": lambda v, z: v.__setitem__(..., 3.0),
}


def _run(lib, view: str, write: str, x, w, p):
    """build()'s body: y from the input and a parameter, a write through a view of y, a loss
    that reads y (and the view again)."""
    views = TORCH_VIEWS if lib is torch else VIEWS
    y = x * p
    v = views[view](y)
    z = v * 0 + views[view](x)
    WRITES[write](v, z)
    loss = (y * w).sum() + (v * v).sum()
    return y, loss


def _torch(view, write, xs, ws, ps):
    p = torch.tensor(ps, requires_grad=True)
    y, loss = _run(torch, view, write, torch.tensor(xs), torch.tensor(ws), p)
    loss.backward()
    return y.detach().numpy(), loss.detach().numpy(), p.grad.numpy()


class _Model(nn.Module):
    def __init__(self, ps):
        super().__init__()
        self.p = nn.Parameter(flow.tensor(ps))


def _graph(view, write, xs, ws, ps):
    m = _Model(ps)
    opt = flow.optim.SGD(m.parameters(), lr=1.0)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x, w):
            y, loss = _run(flow, view, write, x, w, self.m.p)
            loss.backward()
            return y, loss

    y, loss = G()(flow.tensor(xs), flow.tensor(ws))
    return y.numpy(), loss.numpy(), ps - m.p.numpy()  # lr 1: the step is the gradient


def _eager(view, write, xs, ws, ps):
    p = flow.tensor(ps, requires_grad=True)
    y, loss = _run(flow, view, write, flow.tensor(xs), flow.tensor(ws), p)
    loss.backward()  # eager autograd rebases the written base (dispatch/copy_slices.py)
    return y.detach().numpy(), loss.detach().numpy(), p.grad.numpy()


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_write_through_view_in_graph_matches_torch(view, write, executor, monkeypatch):
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    rng = np.random.default_rng(0)
    xs, ws, ps = (rng.standard_normal((4, 6)) for _ in range(3))
    ref = _torch(view, write, xs, ws, ps)
    got = _graph(view, write, xs, ws, ps)
    eager = _eager(view, write, xs, ws, ps)
    for what, a, b, e in zip(("value", "loss", "gradient"), got, ref, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=what)
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12, err_msg=f"{what}: eager")


def _eager_and_graph(fn, *arrays):
    """``fn``'s results eagerly and in a graph (no autograd), as NumPy arrays."""

    class G(nn.Graph):
        def build(self, *xs):
            return fn(*xs)

    eager = fn(*(flow.tensor(a) for a in arrays))
    graph = G()(*(flow.tensor(a) for a in arrays))
    return [t.numpy() for t in eager], [t.numpy() for t in graph]


def _other_views(x):
    y = x * 1
    a, b, c = y[:, 0], y[1], y.t()
    d = b[2:]                   # a view of a view
    a.mul_(10)                  # reaches y, b (at column 0), c, but not d
    d.fill_(-1)                 # reaches y, b, c, but not a
    e = y[3]
    y.add_(100)                 # the base written directly: every view sees it
    return y, a, b, c, d, e


def _copy_not_view(x):
    y = x * 1
    r = y.t().reshape(24)       # not expressible as a view: a copy, eagerly as in torch
    r.mul_(2)
    s = y.reshape(6, 4)         # a view
    s[0] = 7.0
    return y, r, s


def _detached_aliases(x):
    y = x * 1
    d = y.detach()              # the same values outside autograd: a write reaches y
    d.mul_(5)
    e = y.data[1]               # a view of an alias
    e.fill_(-2)                 # reaches d and y
    y.add_(1)                   # the base written: d sees it
    f = d.detach()              # an alias of an alias
    f[0, 0] = 9.0
    return y, d, e, f


def _inplace_shape_changes(x):
    y = x * 1
    v = y[1]
    v.unsqueeze_(0)             # still a view of y, now (1, 6)
    v.mul_(2)
    w = y[2:3]
    w.squeeze_(0)
    w.add_(100)
    c = y.t()
    y.unsqueeze_(0)             # a base changing shape: its views still alias it
    c[0].fill_(-1)
    y.add_(1000)
    return y, v, w, c


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("fn", [_other_views, _copy_not_view, _detached_aliases,
                                _inplace_shape_changes])
def test_every_live_view_reads_the_written_base(fn, executor, monkeypatch):
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    x = np.arange(24.0).reshape(4, 6)
    eager, graph = _eager_and_graph(fn, x)
    ref = [t.numpy() for t in fn(torch.tensor(x))]
    for i, (e, g, r) in enumerate(zip(eager, graph, ref)):
        np.testing.assert_array_equal(e, r, err_msg=f"eager result {i}")
        np.testing.assert_array_equal(g, r, err_msg=f"graph result {i}")


class _Stats(nn.Module):
    """Buffers written through views under no_grad, as running statistics are."""

    def __init__(self):
        super().__init__()
        self.register_buffer("stats", flow.zeros(2, 3))
        self.register_buffer("count", flow.zeros(4))

    def forward(self, x):
        with flow.no_grad():
            self.stats[0].add_(x.sum(0))
            self.stats.t()[2].mul_(0.5)      # column 2 through a transposed view
            self.count.view(2, 2)[:, 1] += 1.0
        return x * self.stats[1].sum()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_state_written_through_a_view_updates_the_eager_state(executor, monkeypatch):
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    m_g, m_e = _Stats(), _Stats()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m_g

        def build(self, x):
            return self.m(x)

    g = G()
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((5, 3))
        out = g(flow.tensor(x))
        ref = m_e(flow.tensor(x))
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(m_g.stats.numpy(), m_e.stats.numpy())
    np.testing.assert_array_equal(m_g.count.numpy(), [0.0, 3.0, 0.0, 3.0])
    assert m_g.stats.numpy()[0, 0] != 0.0


class _WritesIntoExpand(nn.Module):
    def forward(self, x):
        y = x * 1
        y.expand(3, 4).mul_(2)
        return y


@pytest.mark.timeout(60)
def test_a_write_through_a_view_that_cant_be_written_back_raises():
    m = _WritesIntoExpand()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.body = m

        def build(self, x):
            return self.body(x)

    with pytest.raises(RuntimeError, match=r"mul_.*'expand'.*\[in module body\]"):
        G()(flow.ones(1, 4))


class _ClampedWeight(nn.Module):
    """A parameter clamped in place through ``.data`` before use (outside autograd), and a
    buffer counted through ``detach()``."""

    def __init__(self, ps):
        super().__init__()
        self.p = nn.Parameter(flow.tensor(ps))
        self.register_buffer("calls", flow.zeros(1))

    def forward(self, x):
        self.p.data.clamp_(-0.5, 0.5)
        self.calls.detach().add_(1)
        return (x * self.p).sum() * self.p.sum()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_writes_through_detach_and_data_reach_parameters_and_buffers(executor, monkeypatch):
    """A write into ``p.data`` / ``buf.detach()`` in build() changes the parameter or buffer as
    eagerly and in PyTorch; the gradient is that of the written value (autograd does not see
    the write), over three training steps."""
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    rng = np.random.default_rng(3)
    ps = rng.standard_normal((4, 6))
    xs = [rng.standard_normal((4, 6)) for _ in range(3)]
    m_g, m_e = _ClampedWeight(ps), _ClampedWeight(ps)
    opt_g = flow.optim.SGD(m_g.parameters(), lr=0.1)
    opt_e = flow.optim.SGD(m_e.parameters(), lr=0.1)
    tp = torch.tensor(ps, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m_g
            self.add_optimizer(opt_g)

        def build(self, x):
            loss = self.m(x)
            loss.backward()
            return loss

    g = G()
    for x in xs:
        loss_g = g(flow.tensor(x)).numpy()
        loss_e = m_e(flow.tensor(x))
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        tp.data.clamp_(-0.5, 0.5)
        loss_t = (torch.tensor(x) * tp).sum() * tp.sum()
        topt.zero_grad()
        loss_t.backward()
        topt.step()
        np.testing.assert_allclose(loss_g, loss_t.item(), rtol=1e-12)
        np.testing.assert_allclose(loss_e.numpy(), loss_t.item(), rtol=1e-12)
    np.testing.assert_allclose(m_g.p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m_e.p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert m_g.calls.numpy()[0] == 3.0 and m_e.calls.numpy()[0] == 3.0


def _no_grad_view_step(x, p, grad_write: bool, chain: bool = False):
    """build()'s body: a view of y made under no_grad(), written with grad mode on (refused,
    as eagerly and by PyTorch) or under no_grad() too (the running-statistics pattern)."""
    y = x * p
    with flow.no_grad():
        v = y[0:3]
        if not grad_write:
            v.mul_(3)
    if chain:
        v = v[1:]
    if grad_write:
        v.mul_(3)
    loss = (y * y).sum()
    return y, loss


@pytest.mark.parametrize("chain", [False, True], ids=["view", "view_of_view"])
@pytest.mark.parametrize("grad_write", [True, False], ids=["grad_write", "no_grad_write"])
def test_view_made_under_no_grad_in_graph_as_eagerly(grad_write, chain):
    xs, ps = np.arange(1.0, 5.0), np.full(4, 0.5)
    m = _Model(ps)
    opt = flow.optim.SGD(m.parameters(), lr=1.0)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x):
            y, loss = _no_grad_view_step(x, self.m.p, grad_write, chain)
            loss.backward()
            return y, loss

    p = flow.tensor(ps, requires_grad=True)
    if grad_write:
        for run in (lambda: _no_grad_view_step(flow.tensor(xs), p, True, chain),
                    lambda: G()(flow.tensor(xs))):
            with pytest.raises(RuntimeError, match="scalar_mul_: a view .* under no_grad"):
                run()
        return
    y, loss = G()(flow.tensor(xs))
    ye, le = _no_grad_view_step(flow.tensor(xs), p, False, chain)
    le.backward()
    np.testing.assert_array_equal(y.numpy(), ye.numpy())
    np.testing.assert_array_equal(ps - m.p.numpy(), p.grad.numpy())
