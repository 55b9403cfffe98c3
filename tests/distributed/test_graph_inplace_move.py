"""What ordinary models do in a distributed nn.Graph (issue #15): in-place ops on global
tensors, moves between placements that share ranks, AMP. The rank scripts
``graph_inplace.py``, ``graph_move_shared.py`` and ``graph_amp.py`` run through ``mpiexec`` on
2 ranks; a world of one process shows the Job (the sbp of an in-place op's output)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.distributed.test_distributed import needs_mpi, run_ranks


def _ok(code: int, out: str, n: int) -> None:
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_in_place_ops_in_a_data_parallel_graph_train_like_one_process(executor):
    code, _, out = run_ranks(2, "graph_inplace.py", executor, timeout=290)
    _ok(code, out, 2)


class _Fwd(nn.Graph):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def build(self, *args):
        return self.fn(*args)


@pytest.mark.timeout(60)
def test_in_place_op_keeps_the_written_tensors_sbp_in_the_job():
    pl = flow.placement("cpu", ranks=[0])
    S0, S1, P = flow.sbp.split(0), flow.sbp.split(1), flow.sbp.partial_sum
    rng = np.random.default_rng(3)
    xv, wv = rng.standard_normal((4, 6)), rng.standard_normal((6, 3))

    def fn(x, w):
        y = flow.matmul(x, w)      # S(1) x S(0) -> P
        y.mul_(2.0)                # P * scalar: stays P
        y.add_(1.0)                # no P signature for add: boxed back to P
        z = x * 1.0
        z.relu_()                  # S(1) -> S(1)
        z[0] = 4.0                 # setitem runs broadcast, boxed back to S(1)
        return y, z

    g = _Fwd(fn)
    y, z = g(flow.tensor(xv, placement=pl, sbp=S1), flow.tensor(wv, placement=pl, sbp=S0))
    assert y.sbp == (P,) and z.sbp == (S1,)
    np.testing.assert_allclose(y.numpy(), 2 * xv @ wv + 1, rtol=1e-12)
    want = np.maximum(xv, 0)
    want[0] = 4.0
    np.testing.assert_array_equal(z.numpy(), want)
    ops = {}
    for o in g.forward_job.ops:
        ops.setdefault(o.op_type, o)   # the first of each type
    assert ops["scalar_mul"].tags["global"]["out"] == ("P",)
    assert ops["relu"].tags["global"]["out"] == ("S(1)",)
    assert ops["setitem"].tags["global"]["out"] == ("B",)
    back = [(o.tags["boxing"]["from"], o.tags["boxing"]["to"]) for o in g.forward_job.ops
            if "boxing" in o.tags and "keeps the sbp" in o.tags["boxing"]["reason"]]
    # scalar_add ran on a reduce-scattered y (S(0)); its result is boxed back to P
    assert ops["scalar_add"].tags["global"]["out"] == ("S(0)",)
    assert back[0][0] == "S(0)" and back[-1] == ("B", "S(1)"), back
    assert [to for _, to in back] == ["P"] * (len(back) - 1) + ["S(1)"], back


@pytest.mark.timeout(60)
def test_gradient_through_in_place_global_ops_equals_eager_global():
    pl = flow.placement("cpu", ranks=[0])
    rng = np.random.default_rng(4)
    xv, wv = rng.standard_normal((5, 4)), rng.standard_normal((4, 4))

    col = np.zeros((5, 4), bool)
    col[:, 1] = True

    def loss_of(x, w, graph):
        h = flow.matmul(x, w)
        h += x
        if graph:
            h[:, 1] = 0.0
        else:  # (eagerly, setitem of a number into a global tensor is refused)
            h.masked_fill_(flow.tensor(col, placement=pl, sbp=flow.sbp.broadcast), 0.0)
        h.relu_()
        return (h * h).sum()

    def grads(graph: bool):
        x = flow.tensor(xv, placement=pl, sbp=flow.sbp.split(0))
        w = nn.Parameter(flow.tensor(wv, placement=pl, sbp=flow.sbp.broadcast))

        class Train(nn.Graph):
            def __init__(self):
                super().__init__()
                self.holder = nn.Module()
                self.holder.w = w
                self.add_optimizer(flow.optim.SGD([w], lr=1.0))

            def build(self, x):
                loss = loss_of(x, self.holder.w, True)
                loss.backward()
                return loss

        if graph:
            loss = Train()(x)
        else:
            loss = loss_of(x, w, False)
            loss.backward()
            with flow.no_grad():
                w -= w.grad
        return float(loss.numpy()), w.numpy()

    (la, wa), (lb, wb) = grads(False), grads(True)
    assert la == pytest.approx(lb, rel=1e-12)
    np.testing.assert_allclose(wb, wa, rtol=1e-12)
    # float64 finite differences of the loss in w (the update is w - grad)
    h = xv @ wv + xv
    h[:, 1] = 0.0
    h = np.maximum(h, 0)
    eps = 1e-6

    def f(wm):
        q = xv @ wm + xv
        q[:, 1] = 0.0
        q = np.maximum(q, 0)
        return (q * q).sum()

    num = np.zeros_like(wv)
    for i in np.ndindex(*wv.shape):
        d = np.zeros_like(wv)
        d[i] = eps
        num[i] = (f(wv + d) - f(wv - d)) / (2 * eps)
    np.testing.assert_allclose(wv - wb, num, rtol=1e-6, atol=1e-6)
    assert la == pytest.approx((h * h).sum(), rel=1e-12)


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_moves_between_placements_sharing_ranks_train_like_one_process(executor):
    code, _, out = run_ranks(2, "graph_move_shared.py", executor, timeout=290)
    _ok(code, out, 2)


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_amp_data_and_tensor_parallel_graphs_close_to_one_process_amp(executor):
    code, _, out = run_ranks(2, "graph_amp.py", executor, timeout=290)
    _ok(code, out, 2)


@pytest.mark.timeout(60)
def test_amp_global_graph_in_one_process_equals_local_amp_graph():
    # the float16 GradScaler's in-place updates of its (local) state run in the global Job;
    # the AMP casts carry placement and sbp
    pl = flow.placement("cpu", ranks=[0])
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((6, 4)).astype(np.float32)

    def train(glob: bool):
        flow.manual_seed(2)
        m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
        x = flow.tensor(xv)
        if glob:
            m.to_global(placement=pl, sbp=flow.sbp.broadcast)
            x = flow.tensor(xv, placement=pl, sbp=flow.sbp.split(0))

        class Train(nn.Graph):
            def __init__(self):
                super().__init__()
                self.m = m
                self.add_optimizer(flow.optim.SGD(m.parameters(), lr=0.1))
                self.config.enable_amp(True)

            def build(self, x):
                loss = (self.m(x) ** 2).mean()
                loss.backward()
                return loss

        g = Train()
        losses = [float(g(x).numpy()) for _ in range(3)]
        return losses, [p.numpy() for p in m.parameters()], g

    la, pa, _ = train(False)
    lb, pb, g = train(True)
    np.testing.assert_allclose(lb, la, rtol=1e-6)
    for a, b in zip(pa, pb):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    casts = [o for o in g.full_job.ops if "amp_cast" in o.name]
    assert casts and all(o.tags["global"]["placement"] == "cpu:0" for o in casts)
    assert any(o.op_type == "assign" and "_grad_scaler" in o.inputs[0] for o in g.full_job.ops)


@pytest.mark.timeout(60)
def test_in_place_misuse_in_a_global_graph_raises_as_eagerly():
    pl = flow.placement("cpu", ranks=[0])
    w = nn.Parameter(flow.randn(3, 3, placement=pl, sbp=flow.sbp.broadcast))

    class Train(nn.Graph):
        def __init__(self, f):
            super().__init__()
            self.h = nn.Module()
            self.h.w = w
            self.f = f
            self.add_optimizer(flow.optim.SGD([w], lr=0.1))

        def build(self, x):
            loss = self.f(x, self.h.w)
            loss.backward()
            return loss

    def overwrite_saved(x, w):   # relu_ saves its output, += then overwrites it
        h = flow.matmul(x, w)
        h.relu_()
        h += x
        return h.sum()

    def write_leaf(x, w):
        w.add_(1)
        return (x * w).sum()

    x = flow.randn(3, 3, placement=pl, sbp=flow.sbp.split(0))
    with pytest.raises(RuntimeError, match="relu_backward: one of the tensors needed for "
                                           "gradient computation has been modified"):
        Train(overwrite_saved)(x)
    with pytest.raises(RuntimeError, match="scalar_add_: a leaf tensor that requires grad"):
        Train(write_leaf)(x)
