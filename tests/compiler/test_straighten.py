"""Straightening (``compiler/straighten.py``): control edges from backward leaves (weight- and
bias-gradient ops) to the next backward op change only when tasks act, never what they
compute, so a graph trains to the same losses with it on and off, with no more register
memory, also under gradient accumulation (micro-batches)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler.straighten import straighten
from tests.compiler.test_codegen_memory import _train

pytestmark = pytest.mark.timeout(300)

ENV = "ACTORFLOW_GRAPH_STRAIGHTEN"


def test_straightening_adds_edges_keeps_losses_and_saves_memory(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    g_on, on = _train()
    monkeypatch.setenv(ENV, "0")
    g_off, off = _train()
    assert straighten(g_off.full_job.copy()) > 0
    np.testing.assert_allclose(on, off, rtol=1e-6)
    assert g_on.plan.memory["bytes_with_sharing"] <= g_off.plan.memory["bytes_with_sharing"]


def _accumulating(steps: int = 3) -> list:
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    x = flow.tensor(rng.standard_normal((12, 8)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 3, 12))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            self.config.set_gradient_accumulation_steps(3)

        def build(self, a, b):
            loss = F.cross_entropy(self.model(a), b)
            loss.backward()
            return loss

    g = Train()
    return [g(x, y).numpy().ravel().tolist() for _ in range(steps)]


def test_straightening_under_gradient_accumulation(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    on = _accumulating()
    monkeypatch.setenv(ENV, "0")
    off = _accumulating()
    np.testing.assert_allclose(on, off, rtol=1e-6)


def _ctrl_edges(plan) -> int:
    return sum(len(t.consumed_regsts.get("in_ctrl", ())) for t in plan.tasks)


def _linear_graph(mode):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            if mode is not None:
                self.config.enable_straighten_algorithm(mode)

        def build(self, a, b):
            loss = F.cross_entropy(self.model(a), b)
            loss.backward()
            return loss

    g = Train()
    rng = np.random.default_rng(0)
    loss = g(flow.tensor(rng.standard_normal((4, 8)).astype(np.float32)),
             flow.tensor(rng.integers(0, 3, 4))).numpy()
    return g, float(loss)


@pytest.mark.parametrize("env", ["0", "1"])
def test_config_mode_chooses_straightening_over_the_default(monkeypatch, env):
    monkeypatch.setenv(ENV, env)
    default, loss = _linear_graph(None)
    on, loss_on = _linear_graph("MemoryFirst")
    off, loss_off = _linear_graph("Disable")
    speed, _ = _linear_graph("SpeedFirst")
    overlap, _ = _linear_graph("OverlapCpuGpu")  # no GPU nodes: MemoryFirst, as OneFlow
    assert _ctrl_edges(on.plan) > _ctrl_edges(off.plan) == _ctrl_edges(speed.plan)
    assert _ctrl_edges(overlap.plan) == _ctrl_edges(on.plan)
    assert _ctrl_edges(default.plan) == _ctrl_edges(on.plan if env == "1" else off.plan)
    assert loss == loss_on == loss_off


def test_config_mode_is_checked():
    with pytest.raises(ValueError, match="enable_straighten_algorithm: mode must be one of"):
        nn.Graph().config.enable_straighten_algorithm("Fastest")


def test_leaf_edges_skip_view_ops():
    """A view folded into its readers has no task: an edge to it would be lost, so a leaf's
    edge goes to the next backward op that is not a view (with generation's rewrites, reshape
    views of gelu's gradient come right after weight-gradient leaves)."""
    from actorflow.compiler.codegen import recompute
    from actorflow.ops import registry

    def view(c) -> bool:
        return c.op_type in registry.all_ops() and registry.get(c.op_type).view_fn is not None

    g, _ = _train()
    job = recompute(g.full_job.copy())  # as compile_job: gelu's gradient moves before a leaf
    before = {c.name: list(c.ctrl_inputs) for c in job.ops}
    assert straighten(job) > 0
    gained = [c for c in job.ops if c.ctrl_inputs != before[c.name]]
    assert gained and not any(view(c) for c in gained)
    assert any(view(c) and c.tags.get("phase") == "backward" for c in job.ops)  # the case


def test_chain_orders_every_kernel_pair_and_never_views():
    from actorflow.compiler.straighten import _plain, _reaches, chain
    from actorflow.ops import registry

    g, _ = _train()
    job = g.full_job.copy()
    straighten(job)
    added = chain(job)
    assert added > 0
    job.verify()  # still acyclic and well formed
    order = job.topological_order()
    kernels = [c for c in order if _plain(c) and c.inputs
               and not registry.get(c.op_type).view_fn]
    anc = _reaches(order)
    pos = {c.name: i for i, c in enumerate(order)}
    for a, b in zip(kernels, kernels[1:]):
        assert anc[b.name] >> pos[a.name] & 1, f"{a.name} and {b.name} are not ordered"
    views = {c.name for c in order if _plain(c) and registry.get(c.op_type).view_fn}
    assert not any(set(c.ctrl_inputs) & views for c in order)
    assert chain(job) == 0  # nothing left to order


def test_chain_only_on_one_compute_lane(monkeypatch):
    monkeypatch.setenv(ENV, "1")
    monkeypatch.setenv("ACTORFLOW_GRAPH_COMPUTE_LANES", "2")
    g2, two = _train()
    monkeypatch.setenv("ACTORFLOW_GRAPH_COMPUTE_LANES", "1")
    g1, one = _train()
    np.testing.assert_allclose(one, two, rtol=1e-6)
    assert _ctrl_edges(g1.plan) > _ctrl_edges(g2.plan)
    assert g1.plan.memory["bytes_with_sharing"] <= g2.plan.memory["bytes_with_sharing"]
