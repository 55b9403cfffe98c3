"""A checkpoint saved on 2 ranks, loaded on 1 and on 4 (run by ``test_graph_ckpt_ranks.py``).

``mpiexec -n 2 ... save DIR``: a global model (fc1.weight split(0), fc2.weight split(1), both
of 7 rows/columns, so 4 ranks split them unevenly; the biases broadcast) trains 3 steps with
Adam eagerly, and a second one as a global nn.Graph; the model, optimizer and graph state
dicts are saved with ``global_dst_rank=0``; both train 3 more steps, and rank 0 writes their
losses and the saved logical values (``ref.npz``).

``... load DIR`` on 1 process: plain local models load the files (values equal to the 2-rank
logical values; the graph's step is 3) and continue to the 2-rank losses. On 4 processes
(``mpiexec -n 4``): global models of the same layout load ``flow.load(global_src_rank=0)``
(eager) and rank 0's file made global with ``flow.utils.global_view.to_global`` (the graph,
OneFlow's pattern: the other ranks pass None); every shard follows OneFlow's uneven split;
both continue to the 2-rank losses. Prints ``OK rank R``."""
import os
import sys

import numpy as np

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as nnf
from actorflow.framework.sbp_parallel import shard_range

MODE, DIR = sys.argv[1], sys.argv[2]
r, n = flow.env.get_rank(), flow.env.get_world_size()
B, S0, S1 = flow.sbp.broadcast, flow.sbp.split(0), flow.sbp.split(1)
LAYOUT = {"0.weight": S0, "0.bias": B, "2.weight": S1, "2.bias": B}
STEP = "System-Train-TrainStep"
K = 3  # steps before the checkpoint, and after it
rng = np.random.default_rng(5)
X = rng.standard_normal((8, 5)).astype(np.float32)
Y = rng.integers(0, 3, size=8)


def model(seed: int, pl=None):
    flow.manual_seed(seed)
    m = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    if pl is not None:
        for k, p in m.named_parameters():
            p.data = p.detach().to_global(placement=pl, sbp=B).to_global(sbp=LAYOUT[k])
    return m


class Train(nn.Graph):
    def __init__(self, m, opt):
        super().__init__()
        self.m = m
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nnf.cross_entropy(self.m(x), y)
        loss.backward()
        return loss


def data(pl):
    if pl is None:
        return flow.tensor(X), flow.tensor(Y)
    return flow.tensor(X, placement=pl, sbp=S0), flow.tensor(Y, placement=pl, sbp=S0)


def eager_steps(m, opt, pl, k):
    x, y = data(pl)
    out = []
    for _ in range(k):
        opt.zero_grad()
        loss = nnf.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        out.append(float(loss.numpy()))
    return out


def graph_steps(g, pl, k):
    x, y = data(pl)
    return [float(g(x, y).numpy()) for _ in range(k)]


def step_of(g) -> int:
    t = g.state_dict()[STEP]
    assert t.dtype == flow.int64 and tuple(t.shape) == (1,), (t.dtype, t.shape)
    return int((t.to_local() if t.is_global else t).numpy()[0])


def logical(m) -> dict:
    return {k: v.numpy() for k, v in m.state_dict().items()}


def path(name):
    return os.path.join(DIR, name)


def save():
    pl = flow.placement.all("cpu")
    m = model(1, pl)
    opt = flow.optim.Adam(m.parameters(), lr=0.05)
    eager_steps(m, opt, pl, K)
    flow.save(m.state_dict(), path("model.af"), global_dst_rank=0)
    flow.save(opt.state_dict(), path("opt.af"), global_dst_rank=0)
    ref = {f"model.{k}": v for k, v in logical(m).items()}
    ref["eager"] = eager_steps(m, opt, pl, K)

    gm = model(2, pl)
    g = Train(gm, flow.optim.Adam(gm.parameters(), lr=0.05))
    graph_steps(g, pl, K)
    sd = g.state_dict()
    assert sd[STEP].is_global and sd[STEP].sbp == (B,) and sd[STEP].placement == pl
    assert step_of(g) == K
    flow.save(sd, path("graph.af"), global_dst_rank=0)
    ref.update({f"graph.{k}": v for k, v in logical(gm).items()})
    ref["graph"] = graph_steps(g, pl, K)
    assert step_of(g) == 2 * K and g.compile_count == 1
    if r == 0:
        np.savez(path("ref.npz"), **ref)


def check_values(m, ref, prefix):
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), ref[f"{prefix}.{k}"], err_msg=f"{prefix}.{k}")


def check_shards(m, ref, prefix):
    """Each rank's shard is OneFlow's (numpy.array_split's) piece of the logical value."""
    for k, p in m.named_parameters():
        full, sbp = ref[f"{prefix}.{k}"], LAYOUT[k]
        assert p.sbp == (sbp,), (k, p.sbp)
        want = full
        if sbp.is_split:
            a, b = shard_range(full.shape[sbp.dim], n, r)
            want = np.take(full, range(a, b), axis=sbp.dim)
        np.testing.assert_array_equal(p.to_local().numpy(), want, err_msg=f"rank {r} {k}")


def close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=f"rank {r}: {what}")


def load_one():
    ref = np.load(path("ref.npz"))
    m = model(9)
    m.load_state_dict(flow.load(path("model.af")))
    check_values(m, ref, "model")
    opt = flow.optim.Adam(m.parameters(), lr=0.05)
    opt.load_state_dict(flow.load(path("opt.af")))
    close(eager_steps(m, opt, None, K), ref["eager"], "eager losses on 1 process")

    gm = model(8)
    g = Train(gm, flow.optim.Adam(gm.parameters(), lr=0.05))
    sd = flow.load(path("graph.af"))
    assert sd[STEP].is_local and sd[STEP].numpy().tolist() == [K]
    g.load_state_dict(sd)
    check_values(gm, ref, "graph")
    assert step_of(g) == K
    close(graph_steps(g, None, K), ref["graph"], "graph losses on 1 process")
    assert step_of(g) == 2 * K


def load_four():
    ref = np.load(path("ref.npz"))
    pl = flow.placement.all("cpu")
    m = model(9, pl)
    opt = flow.optim.Adam(m.parameters(), lr=0.05)
    m.load_state_dict(flow.load(path("model.af"), global_src_rank=0))
    opt.load_state_dict(flow.load(path("opt.af"), global_src_rank=0))
    check_shards(m, ref, "model")
    close(eager_steps(m, opt, pl, K), ref["eager"], "eager losses on 4 ranks")

    gm = model(8, pl)
    g = Train(gm, flow.optim.Adam(gm.parameters(), lr=0.05))
    local = flow.load(path("graph.af")) if r == 0 else None  # the file is rank 0's
    sd = flow.utils.global_view.to_global(local, placement=flow.placement("cpu", ranks=[0]),
                                          sbp=B, warn_on_non_tensor_leaf=False)
    g.load_state_dict(sd)
    check_shards(gm, ref, "graph")
    assert step_of(g) == K
    close(graph_steps(g, pl, K), ref["graph"], "graph losses on 4 ranks")
    assert step_of(g) == 2 * K and g.compile_count == 1


{"save": save, "load": lambda: load_one() if n == 1 else load_four()}[MODE]()
flow.synchronize()
print(f"OK rank {r}", flush=True)
