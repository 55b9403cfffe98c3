"""Factories ``make() -> (graph, args)`` of distributed training graphs for
``flow.distributed.check_plans(make, world_size=N)``: data parallel, tensor parallel, a
two-stage pipeline (``to_global`` in build or ``set_stage``, gradient accumulation), ZeRO and a
2-D placement; each builds everything for the current (real or simulated) rank. Used by
``test_plan_sim.py`` (one process) and ``graph_check_sim.py`` (under mpiexec)."""
from __future__ import annotations

import numpy as np

import actorflow as flow
import actorflow.nn as nn

B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)


class Train(nn.Graph):
    """``loss = loss_fn(model(x), y)`` (``mid``: applied to the model's output first), backward,
    one optimizer; optional gradient accumulation, ZeRO and pipeline stages."""

    def __init__(self, model, opt, loss_fn, mid=None, acc: int = 1, zero: int = 0,
                 stages=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        self.loss_fn, self.mid = loss_fn, mid
        if acc > 1:
            self.config.set_gradient_accumulation_steps(acc)
        if zero:
            self.config.enable_zero(True, stage=zero, shard_min_size=1)
        if stages is not None:  # OneFlow's way: the graph moves the stages' inputs
            from actorflow.nn.graph import GraphModule

            for k, (name, pl) in enumerate(stages):
                getattr(self.model, name).to(GraphModule).set_stage(k, pl)

    def build(self, x, y):
        out = self.model(x)
        if self.mid is not None:
            out = self.mid(out)
        loss = self.loss_fn(out, y)
        loss.backward()
        return loss


def _xent(out, y):
    return nn.functional.cross_entropy(out, y, reduction="sum")


def _mse(out, t):
    return ((out - t) ** 2).sum()


def dp(n: int = 2, extra_on=None):
    """Data parallel over ranks 0..n-1; ``extra_on``: a rank whose build gathers its batch
    shard and splits it again (an all-gather the other ranks don't issue)."""
    P = flow.placement("cpu", ranks=list(range(n)))
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model.to_global(placement=P, sbp=B)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    extra = extra_on is not None and flow.env.get_rank() == extra_on
    fn = (lambda out, y: _xent(out.to_global(sbp=B).to_global(sbp=S0), y)) if extra else _xent
    x = flow.randn(4 * n, 6, placement=P, sbp=S0)
    y = flow.randint(0, 3, (4 * n,), placement=P, sbp=S0)
    return Train(model, opt, fn), (x, y)


def tp(n: int = 2, out_sbp_on=None):
    """Megatron-style tensor parallel MLP (fc1 split by output features, fc2 by input
    features, the partial output made broadcast); ``out_sbp_on``: ``(rank, sbp)``, a rank
    that boxes the partial output to another sbp."""
    P = flow.placement("cpu", ranks=list(range(n)))
    flow.manual_seed(9)
    m = nn.Sequential(nn.Linear(6, 4 * n + 1), nn.ReLU(), nn.Linear(4 * n + 1, 3))
    m.to_global(placement=P, sbp=B)
    for mod, name, sbp in ((m[0], "weight", S0), (m[0], "bias", S0), (m[2], "weight", S1)):
        p = getattr(mod, name)
        setattr(mod, name, nn.Parameter(p.detach().to_global(sbp=sbp)))
    opt = flow.optim.SGD(m.parameters(), lr=1.0)
    to = B
    if out_sbp_on is not None and flow.env.get_rank() == out_sbp_on[0]:
        to = out_sbp_on[1]
    x = flow.randn(5, 6, placement=P, sbp=B)
    t = flow.randn(5, 3, placement=P, sbp=B)
    return Train(m, opt, _mse, mid=lambda y: y.to_global(sbp=to)), (x, t)


class _Stages(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage0 = nn.Sequential(nn.Linear(6, 7), nn.ReLU())
        self.stage1 = nn.Linear(7, 3)


def pipe(mode: str = "move", acc: int = 1, acc_on=None, n: int = 2):
    """A two-stage pipeline on the first and second half of ``n`` ranks (on 4, each stage data
    parallel, the batch split): the activation moved with ``to_global`` in build
    (``mode="move"``) or by ``set_stage``; ``acc`` micro-batches (``acc_on``: ``(rank, acc)``,
    a rank that accumulates another number of micro-batches)."""
    P0 = flow.placement("cpu", list(range(n // 2)))
    P1 = flow.placement("cpu", list(range(n // 2, n)))
    L = S0 if n > 2 else B
    flow.manual_seed(4)
    m = _Stages().to(flow.float64)
    m.stage0.to_global(placement=P0, sbp=B)
    m.stage1.to_global(placement=P1, sbp=B)
    opt = flow.optim.SGD(m.parameters(), lr=0.02)
    if acc_on is not None and flow.env.get_rank() == acc_on[0]:
        acc = acc_on[1]

    class Pipe(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.stage0, self.stage1 = inner.stage0, inner.stage1

        def forward(self, x):
            h = self.stage0(x)
            if mode == "move":
                h = h.to_global(placement=P1, sbp=L)
            return self.stage1(h)

    stages = [("stage0", P0), ("stage1", P1)] if mode == "set_stage" else None
    x = flow.randn(8, 6, dtype=flow.float64, placement=P0, sbp=L)
    t = flow.randn(8, 3, dtype=flow.float64, placement=P1, sbp=L)
    return Train(Pipe(m), opt, _mse, acc=acc, stages=stages), (x, t)


def zero(stage: int, n: int = 2, adam: bool = True):
    """Data parallel with ZeRO ``stage`` (optimizer state split(0); uneven rows)."""
    P = flow.placement("cpu", ranks=list(range(n)))
    flow.manual_seed(5)
    m = nn.Sequential(nn.Linear(16, 16 * n + 1), nn.ReLU(), nn.Linear(16 * n + 1, 4))
    m.to_global(placement=P, sbp=B)
    opt = flow.optim.Adam(m.parameters(), lr=0.05) if adam else \
        flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x = flow.randn(4 * n + 2, 16, placement=P, sbp=S0)
    y = flow.randint(0, 4, (4 * n + 2,), placement=P, sbp=S0)
    return Train(m, opt, _xent, zero=stage), (x, y)


def nd():
    """Data x tensor parallel on the 2x2 placement [[0, 1], [2, 3]]: the batch (S0, B), fc1
    (B, S0), fc2's weight (B, S1), its partial output made (S0, B)."""
    PL = flow.placement("cpu", [[0, 1], [2, 3]])
    flow.manual_seed(21)
    m = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))
    m.to_global(placement=PL, sbp=(B, B))
    for mod, name, sbp in ((m[0], "weight", (B, S0)), (m[0], "bias", (B, S0)),
                           (m[2], "weight", (B, S1))):
        p = getattr(mod, name)
        setattr(mod, name, nn.Parameter(p.detach().to_global(sbp=sbp)))
    opt = flow.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    rng = np.random.default_rng(13)
    x = flow.tensor(rng.standard_normal((7, 4)).astype(np.float32), placement=PL, sbp=(S0, B))
    y = flow.tensor(rng.integers(0, 3, size=7), placement=PL, sbp=(S0, B))
    return Train(m, opt, _xent, mid=lambda o: o.to_global(sbp=(S0, B))), (x, y)
