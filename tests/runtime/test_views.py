"""View ops as aliases on the actor runtime (issue #17): a view task publishes a NumPy view of
its input register instead of a copy. Values and gradients stay bit-identical to the reference
executor (which copies) and to eager mode; in-place writes after a view, views of parameters
and views returned as outputs keep their values."""
import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.helpers import FnGraph, assert_graph_matches


class ViewNet(nn.Module):
    """Every view op kind: a view of a parameter (w.t()), split, reshape, permute, narrow, basic
    slicing with a step, unsqueeze + expand, diagonal, and views of views."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.randn(12, 8) * 0.3)
        self.v = nn.Parameter(flow.randn(4, 9) * 0.3)

    def forward(self, x):                       # x (n, 8)
        h = flow.matmul(x, self.w.t())          # (n, 12)
        a, b = h.chunk(2, dim=1)                # (n, 6) each
        c = a.reshape(-1, 2, 3).permute(2, 0, 1)  # (3, n, 2)
        d = b[:, ::2].unsqueeze(0).expand(3, -1, -1)
        e = c.narrow(2, 0, 1) * d               # (3, n, 3)
        f = flow.matmul(e.transpose(0, 1).reshape(-1, 9), self.v.t())  # (n, 4)
        g = flow.diagonal(a) * 0.5              # (min(n, 6),)
        return (f.tanh() ** 2).mean() + (g * g).sum()


def _batches(n: int):
    rng = np.random.default_rng(7)
    return [flow.from_numpy(rng.standard_normal((6, 8)).astype(np.float32)) for _ in range(n)]


def _train(mode: str, monkeypatch, micro: int = 1):
    """Losses and final parameters of 4 SGD-momentum steps: eager, or a Graph on the actor
    runtime ("runtime") or the reference executor ("reference")."""
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if mode == "reference" else "0")
    flow.manual_seed(0)
    model = ViewNet()
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = None
    if mode == "eager":
        def step(x):
            opt.zero_grad()
            loss = model(x)
            loss.backward()
            opt.step()
            return loss
    else:
        class Train(nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(opt)
                if micro > 1:
                    self.config.set_gradient_accumulation_steps(micro)

            def build(self, x):
                loss = self.model(x)
                loss.backward()
                return loss
        g = Train()
        step = g
    losses = [step(x).numpy().copy() for x in _batches(4)]
    return losses, [p.numpy().copy() for p in model.parameters()], g


def _view_tasks(g) -> set:
    """The op types of the Plan's views: view tasks and views folded into their readers."""
    folded = {s[0] for t in g.plan.tasks for steps in t.input_views.values() for s in steps}
    return {t.op_type for t in g.plan.tasks if t.kind == "view"} | folded


@pytest.fixture(params=["folded", "tasks"])
def fold(request, monkeypatch):
    """Views folded into their readers where possible (the default), or every one a task."""
    monkeypatch.setenv("ACTORFLOW_GRAPH_FOLD_VIEWS", "1" if request.param == "folded" else "0")
    return request.param


@pytest.mark.timeout(60)
def test_training_through_views_is_bit_identical_to_reference_and_eager(monkeypatch, fold):
    r_losses, r_params, _ = _train("reference", monkeypatch)
    e_losses, e_params, _ = _train("eager", monkeypatch)
    losses, params, g = _train("runtime", monkeypatch)
    assert _view_tasks(g) >= {"transpose", "split", "reshape", "narrow", "getitem", "expand",
                              "diagonal"}
    # the runtime runs generated kernels (tanh: libm's) where the others run NumPy's
    for a, b, c in zip(losses, r_losses, e_losses):
        assert_graph_matches(a, b, "loss vs reference")
        assert_graph_matches(a, c, "loss vs eager")
    for a, b, c in zip(params, r_params, e_params):
        assert_graph_matches(a, b, "parameter vs reference")
        assert_graph_matches(a, c, "parameter vs eager")
    # the updates of w and v wait for every reader of their transposed views
    plan = g.plan
    for t in plan.tasks:
        if t.kind == "view" and t.op_type == "transpose":
            src = plan.regst_descs[t.input_blobs[0][0]]
            if plan.task(src.producer).kind == "variable":
                assert plan.regst_descs[t.produced_regsts["out"]].alias_of == src.regst_desc_id


@pytest.mark.timeout(60)
def test_gradient_accumulation_through_views_matches_the_reference(monkeypatch, fold):
    r_losses, r_params, _ = _train("reference", monkeypatch, micro=2)
    losses, params, g = _train("runtime", monkeypatch, micro=2)
    assert "transpose" in _view_tasks(g)
    for a, b in zip(losses, r_losses):
        assert_graph_matches(a, b, "loss")
    for a, b in zip(params, r_params):
        assert_graph_matches(a, b, "parameter")


class BufferNet(nn.Module):
    """Reads its buffer through views, then writes the buffer in place (an ``assign``)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", flow.arange(12, dtype=flow.float32).reshape(3, 4))

    def forward(self, x):                  # x (4, 3)
        v = self.buf.t()                   # a view of the buffer's memory
        row = self.buf[1]
        self.buf.add_(x.t() * 0.5)         # written after the views were taken
        return v * x, row + 1.0, self.buf * 1.0


@pytest.mark.timeout(60)
def test_in_place_write_after_a_view_matches_the_reference(monkeypatch, fold):
    # views taken before an in-place write of their base see the write, as in eager (the trace
    # rebuilds them from the written base: dispatch/lazy_views.py), on both executors
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)]
    results = {}
    for mode in ("reference", "runtime"):
        monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if mode == "reference" else "0")
        m = BufferNet()
        g = FnGraph(m)
        results[mode] = [[o.numpy().copy() for o in g(flow.from_numpy(x))] for x in xs]
        results[mode].append(m.buf.numpy().copy())
    eager = BufferNet()
    results["eager"] = [[o.numpy().copy() for o in eager(flow.from_numpy(x))] for x in xs]
    results["eager"].append(eager.buf.numpy().copy())
    for a, b, e in zip(results["runtime"], results["reference"], results["eager"]):
        for u, w, v in zip(a, b, e):
            assert np.array_equal(u, w) and np.array_equal(u, v)
    # the written buffer's readers read the new value, not the variable's register
    plan = g.plan
    buf = next(t for t in plan.tasks if t.kind == "variable").produced_regsts["out"]
    readers = {t.op_type for t in plan.tasks if any(rid == buf for rid, _ in t.input_blobs)}
    assert "mul" not in readers and "scalar_add" not in readers


@pytest.mark.timeout(60)
def test_memory_of_a_viewed_register_is_not_reused_while_the_view_is_read(fold):
    # y could take x's block once x's own reader (the view) acted, were the view's readers
    # (the getitem, the sum, the final add) not counted as readers of x's memory
    def fn(a, b):
        x = a * 2.0
        v = x.t()
        q = v[0].sum()
        y = b * q
        return v + y

    g = FnGraph(fn)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    out = g(flow.from_numpy(a), flow.from_numpy(b)).numpy()
    x = a * np.float32(2.0)
    want = x.T + b * x.T[0].sum(dtype=np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    plan = g.plan
    views = [t for t in plan.tasks if t.kind == "view"]
    if fold == "tasks":                     # the view has no memory of its own
        assert views and all(plan.regst_descs[t.produced_regsts["out"]].mem == [[None]]
                             for t in views)
    else:                  # no task at all: the sum and the final add read x's register
        assert not views
        readers = [t for t in plan.tasks if t.input_views]
        assert len(readers) == 2
        assert all(v[0][0] == "transpose" for t in readers for v in t.input_views.values())


@pytest.mark.timeout(60)
def test_views_returned_as_outputs_are_the_callers_copies(fold):
    w = flow.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))

    def fn(x):
        y = x * 1.0
        a, b = y.chunk(2, dim=0)
        return y.t(), a, b[:, ::2], w.t(), x.reshape(-1)

    g = FnGraph(fn)
    x1 = np.arange(16, dtype=np.float32).reshape(4, 4)
    first = g(flow.from_numpy(x1))
    keep = [o.numpy().copy() for o in first]
    g(flow.from_numpy(-x1))                      # a second call reuses the registers
    want = [x1.T, x1[:2], x1[2:, ::2], w.numpy().T, x1.reshape(-1)]
    for o, k, e in zip(first, keep, want):
        assert np.array_equal(o.numpy(), e) and np.array_equal(k, e)
    assert {"transpose", "split", "getitem", "reshape"} <= _view_tasks(g)


def test_a_folded_view_step_gives_the_same_view_for_the_same_register_array():
    # generated kernels find their prepared calls by the ids of their arrays: a folded view of
    # the same register array must be the same object each act; a reshape that has to copy
    # (other strides than planned) copies anew, with the values of this act
    from actorflow.runtime.actors import view_step

    a, b = np.arange(12.0).reshape(3, 4), np.arange(12.0).reshape(3, 4) + 100
    t = view_step("transpose", {"perm": (1, 0)}, 0, (4, 3))
    first = t(a)
    assert np.shares_memory(first, a) and first.shape == (4, 3)
    assert t(a) is first and t(b) is not first and t(b) is t(b) and t(a) is first
    r = view_step("reshape", {}, 0, (12,))
    assert r(a) is r(a)
    at = a.T  # (4, 3) with other strides: reshape copies
    r2 = view_step("reshape", {}, 0, (12,))
    c1 = r2(at)
    at[0, 0] = -5.0
    c2 = r2(at)
    assert c1 is not c2 and not np.shares_memory(c2, a) and c2[0] == -5.0 and c1[0] == 0.0
