"""Shared by the data-parallel rank scripts (``graph_dp.py``, ``graph_inplace.py``): one SGD
momentum training loop run four ways - one process eagerly and in a local Graph (the
reference), the global model eagerly and in a global Graph (parameters broadcast, the batch
split along dim 0) - and compared."""
from __future__ import annotations

import numpy as np

import actorflow as flow
import actorflow.nn as nn


class TrainGraph(nn.Graph):
    """A training step: cross entropy summed over the batch, divided by the batch size."""

    def __init__(self, model, opt, batch: int):
        super().__init__()
        self.model = model
        self.batch = batch
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y, reduction="sum") / self.batch
        loss.backward()
        return loss


def train(make_model, X, Y, *, glob: bool, graph: bool, lr: float, steps: int):
    """(model, losses, graph or None) after ``steps`` steps of ``make_model(glob)``."""
    pl = flow.placement.all("cpu")
    m = make_model(glob)
    opt = flow.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    x, y = flow.tensor(X), flow.tensor(Y)
    if glob:  # the logical batch is X: each rank holds its rows
        x = flow.tensor(X, placement=pl, sbp=flow.sbp.split(0))
        y = flow.tensor(Y, placement=pl, sbp=flow.sbp.split(0))
    g = TrainGraph(m, opt, len(X)) if graph else None
    losses = []
    for _ in range(steps):
        if graph:
            loss = g(x, y)
        else:
            loss = nn.functional.cross_entropy(m(x), y, reduction="sum") / len(X)
            loss.backward()
            opt.step()
            opt.zero_grad()
        losses.append(float(loss.numpy()))
    return m, losses, g


def train_four_ways(make_model, X, Y, *, lr: float, steps: int) -> dict:
    """{"one process": ..., "local graph": ..., "eager global": ..., "global graph": ...}, each
    (model, losses, graph); raises unless the last three match the first (losses and
    parameters to 1e-10) and the loss went down."""
    r = flow.env.get_rank()
    runs = {name: train(make_model, X, Y, glob=glob, graph=graph, lr=lr, steps=steps)
            for name, (glob, graph) in {"one process": (False, False),
                                        "local graph": (False, True),
                                        "eager global": (True, False),
                                        "global graph": (True, True)}.items()}
    ref_m, ref_l, _ = runs["one process"]
    assert ref_l[-1] < ref_l[0], ref_l
    ref_p = [p.numpy() for p in ref_m.parameters()]
    for name, (m, losses, _) in runs.items():
        np.testing.assert_allclose(losses, ref_l, rtol=1e-10, err_msg=f"rank {r}: {name} losses")
        for k, (a, b) in enumerate(zip((p.numpy() for p in m.parameters()), ref_p)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12,
                                       err_msg=f"rank {r}: {name} parameter {k}")
    return runs
