"""Same seed, same numbers: eager training and nn.Graph training of the same model agree.

Each case builds a model after ``flow.manual_seed(0)``, reseeds with ``flow.manual_seed(1)``
before its 10-step loop, and trains once eagerly and once as a Graph (model + loss + backward +
optimizer, and the learning-rate scheduler where the case has one), on the same batches:

* an MLP with SGD + momentum,
* a CNN (conv, batch norm, max/avg pooling, linear) with Adam; its batch-norm buffers
  (running statistics and ``num_batches_tracked``) are compared too,
* the GPT example's model with dropout on (embedding, attention and residual dropout, and
  dropout inside scaled_dot_product_attention), AdamW with gradient clipping in the param
  group and a cosine schedule.

The graph runs the kernels eager runs, on the same values, in an order the data allows, so
losses and every parameter and buffer are bit-identical: on the reference executor and on the
actor runtime, with the fusion passes off and on (a fused op runs the kernels of the ops it
replaces, in their order), with activation checkpointing (the recomputed forward, dropout
included, reuses the seeds of the ops it recomputes), and with gradient accumulation against the
eager loop it stands for (``(loss / n).backward()`` per micro-batch, one step).

The one case where the order of the arithmetic itself differs is gradient accumulation against a
full-batch eager step: the graph sums per-micro-batch means and per-micro-batch weight-gradient
matmuls, eager reduces over the whole batch at once, so float32 rounding differs in the last
bits; there the check is 1e-6 relative to each tensor's largest magnitude.
"""
from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.nn.graph.config import PASS_NAMES
from examples.gpt import GPT
from tests.helpers import GEN_ATOL, assert_graph_matches, numpy_kernels_under_adamw

STEPS = 10
EXECUTORS = ["reference"] + (["runtime"] if importlib.util.find_spec("actorflow.runtime")
                             else [])
# passes that replace the kernels eager runs by other (fused) kernels
FUSING_PASSES = tuple(n for n in PASS_NAMES if n.startswith("fuse_"))


class CNN(nn.Module):
    """conv, batch norm, relu, max pool, conv, batch norm, relu, avg pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.bn2 = nn.BatchNorm2d(6)
        self.avg = nn.AvgPool2d(2)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.avg(F.relu(self.bn2(self.conv2(x))))
        return self.fc(x.flatten(1))


def _batch(kind: str, step: int):
    rng = np.random.default_rng(100 + step)
    if kind == "mlp":
        x = rng.standard_normal((8, 12)).astype(np.float32)
        return flow.from_numpy(x), flow.from_numpy(rng.integers(0, 4, 8))
    if kind == "cnn":
        x = rng.standard_normal((4, 2, 8, 8)).astype(np.float32)
        return flow.from_numpy(x), flow.from_numpy(rng.integers(0, 3, 4))
    return (flow.from_numpy(rng.integers(0, 20, (4, 8))),
            flow.from_numpy(rng.integers(0, 20, (4, 8))))


def _two_groups(model, **clip) -> list:
    """Weights (2-d and up) with weight decay, the rest (biases, norms) without."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.ndim > 1], "weight_decay": 0.01, **clip},
            {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0, **clip}]


def _setup(kind: str, optim: str = ""):
    """(model, optimizer, scheduler or None, loss function), built from seed 0. ``optim``
    swaps the case's optimizer: "adamw" (MLP) or "sgd" (GPT), each in two param groups."""
    flow.manual_seed(0)
    sched = None
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                              nn.Linear(16, 4))
        if optim == "adamw":
            opt = flow.optim.AdamW(_two_groups(model), lr=1e-2)
        else:
            opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    elif kind == "cnn":
        model = CNN()
        opt = flow.optim.Adam(model.parameters(), lr=1e-2)
    else:
        model = GPT(20, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.1)
        clip = {"clip_grad_max_norm": 1.0, "clip_grad_norm_type": 2.0}
        if optim == "sgd":
            opt = flow.optim.SGD(_two_groups(model, **clip), lr=0.1, momentum=0.9)
        else:
            opt = flow.optim.AdamW([{"params": list(model.parameters()), **clip}], lr=1e-2,
                                   weight_decay=0.01)
        sched = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS, eta_min=1e-3)
    if kind == "gpt":
        def loss_fn(m, x, y):
            return m(x, y)[1]
    else:
        def loss_fn(m, x, y):
            return F.cross_entropy(m(x), y)
    return model, opt, sched, loss_fn


def _state(model) -> dict:
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@functools.lru_cache(maxsize=None)  # the reference runs are shared by the tests (read only)
def train_eager(kind: str, micro: int = 1, optim: str = ""):
    """10 eager steps; with ``micro`` > 1 each step runs the batch as ``micro`` micro-batches,
    calling ``(loss / micro).backward()`` on each, then steps once (losses: one per micro)."""
    model, opt, sched, loss_fn = _setup(kind, optim)
    flow.manual_seed(1)
    losses = []
    for step in range(STEPS):
        x, y = _batch(kind, step)
        k = x.shape[0] // micro
        opt.zero_grad()
        step_losses = []
        for i in range(micro):
            loss = loss_fn(model, x[i * k:(i + 1) * k], y[i * k:(i + 1) * k])
            (loss / micro if micro > 1 else loss).backward()
            step_losses.append(loss.numpy().copy())
        if kind == "gpt":
            opt.clip_grad()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(step_losses[0] if micro == 1 else np.stack(step_losses))
    return losses, _state(model), flow.get_rng_state()


def train_graph(kind: str, fuse: bool | None = False, checkpointing: bool = False,
                micro: int = 1, optim: str = "", configure=None):
    """10 graph steps; ``fuse``: every fusion pass on (False: all off; None: the config's
    defaults); ``micro``: gradient accumulation steps (losses: one per micro-batch);
    ``configure(config)``: further settings."""
    model, opt, sched, loss_fn = _setup(kind, optim)

    class TrainGraph(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt, lr_sch=sched)
            if fuse:
                self.config.allow_fuse_model_update_ops(True)
                self.config.allow_fuse_add_to_output(True)
            elif fuse is not None:
                for name in FUSING_PASSES:
                    self.config.disable_pass(name)
            if checkpointing:
                for block in self.model.blocks:
                    block.to(nn.graph.GraphModule).activation_checkpointing = True
            if micro > 1:
                self.config.set_gradient_accumulation_steps(micro)
            if configure is not None:
                configure(self.config)

        def build(self, x, y):
            loss = loss_fn(self.model, x, y)
            loss.backward()
            return loss

    g = TrainGraph()
    flow.manual_seed(1)
    losses = [g(*_batch(kind, step)).numpy().copy() for step in range(STEPS)]
    return losses, _state(model), flow.get_rng_state(), g


@pytest.mark.timeout(60)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("kind", ["mlp", "cnn", "gpt"])
def test_graph_training_is_bit_identical_to_eager(kind, executor, monkeypatch):
    # the reference executor (ACTORFLOW_RUN_GRAPH_BY_VM=1) and, where it exists, the actor
    # runtime run the very same kernels in an order the Job allows
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    _cnn_on_numpy_kernels(kind, monkeypatch)
    e_losses, e_state, e_rng = train_eager(kind)
    g_losses, g_state, g_rng, g = train_graph(kind)
    assert len(g.full_job.ops) > 0
    for step, (a, b) in enumerate(zip(e_losses, g_losses)):
        assert_graph_matches(b, a, f"{kind}: loss differs at step {step}")
    assert e_state.keys() == g_state.keys()
    for k in e_state:
        assert_graph_matches(g_state[k], e_state[k], f"{kind}: {k} differs",
                             atol=_state_atol(k, e_state[k]))
    # the graph drew exactly as many seeds from the global generator as eager did
    assert np.array_equal(e_rng.numpy(), g_rng.numpy())
    if kind == "cnn":  # buffers written in place in build reach the eager module
        assert int(g_state["bn1.num_batches_tracked"]) == STEPS


def _cnn_on_numpy_kernels(kind: str, monkeypatch) -> None:
    """The CNN's conv biases feed batch norms, so their gradient is zero in exact arithmetic:
    what a generated kernel (cross_entropy's row sums) changes in its rounding noise, Adam turns
    into lr-sized steps of those biases. The CNN is compared on the NumPy kernels."""
    if kind == "cnn":
        numpy_kernels_under_adamw(monkeypatch)


def _state_atol(name: str, want) -> float:
    """The absolute tolerance of a trained tensor with generated kernels on, against its
    tensor's scale (its largest value). A generated layer_norm or softmax reorders its row
    sums, so gradients near zero differ in their rounding noise, and AdamW's update (a step of
    about lr whatever the gradient's size) carries that noise into the weight: 1e-4 of the
    scale. The key part of attention's qkv bias has a gradient that is zero in exact arithmetic
    (softmax ignores a constant added to every score of a row): its value is rounding noise
    alone, 1e-3 of the scale. A wrong kernel moves weights by lr-sized steps everywhere, and the
    losses are compared at GEN_RTOL."""
    scale = float(np.abs(np.asarray(want, dtype=np.float64)).max(initial=0.0))
    return max(GEN_ATOL, (1e-3 if name.endswith("attn.qkv.bias") else 1e-4) * scale)


def assert_same_bits(eager, graph, what: str) -> None:
    e_losses, e_state, e_rng = eager[:3]
    g_losses, g_state, g_rng = graph[:3]
    for step, (a, b) in enumerate(zip(e_losses, g_losses)):
        assert_graph_matches(b, a, f"{what}: loss differs at step {step}")
    assert e_state.keys() == g_state.keys()
    for k in e_state:
        assert_graph_matches(g_state[k], e_state[k], f"{what}: {k} differs",
                             atol=_state_atol(k, e_state[k]))
    assert np.array_equal(e_rng.numpy(), g_rng.numpy()), \
        f"{what}: the graph drew a different number of seeds"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["mlp", "cnn", "gpt"])
def test_fused_graph_training_is_bit_identical_to_eager(kind, monkeypatch):
    _cnn_on_numpy_kernels(kind, monkeypatch)
    graph = train_graph(kind, fuse=True)
    fused = [o.op_type for o in graph[3].full_job.ops if o.op_type.startswith(("fused", "multi"))]
    assert fused, "no op was fused"
    assert_same_bits(train_eager(kind), graph, f"{kind} (fused)")


_UPDATE_FUSION = {  # how a graph gets its updates fused (or not)
    "default": None,
    "disable_pass": lambda c: c.disable_pass("fuse_model_update"),
    "allow_false": lambda c: c.allow_fuse_model_update_ops(False),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("micro", [1, 2])
@pytest.mark.parametrize("kind,optim", [("mlp", ""), ("mlp", "adamw"), ("gpt", ""),
                                        ("gpt", "sgd")],
                         ids=["mlp-sgd_momentum", "mlp-adamw_2groups", "gpt-adamw_clip",
                              "gpt-sgd_momentum_2groups_clip"])
@pytest.mark.parametrize("update", list(_UPDATE_FUSION))
def test_batched_updates_by_default_are_bit_identical_to_eager(update, kind, optim, micro,
                                                                executor, monkeypatch):
    # fuse_model_update is on by default (as eager Optimizer.step() batches its updates): one
    # multi_tensor_update per param group, the same bits as one update per parameter and as
    # eager; with gradient accumulation, clipping, two param groups, on both executors
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if executor == "reference" else "0")
    if kind == "gpt" and optim == "":
        numpy_kernels_under_adamw(monkeypatch)
    graph = train_graph(kind, fuse=None, micro=micro, optim=optim,
                        configure=_UPDATE_FUSION[update])
    g = graph[3]
    kinds = [o.op_type for o in g.full_job.ops if o.op_type.endswith("update")]
    groups = _setup(kind, optim)[1].param_groups
    ran = {e["name"]: e for e in g.pass_log}
    if update == "default":
        assert kinds == ["multi_tensor_update"] * len(groups), kinds
        log = ran["fuse_model_update"]  # the pass log shows the fusion
        assert len(log["added"]) == len(groups)
        assert len(log["removed"]) == sum(len(p["params"]) for p in groups)
    else:
        assert "multi_tensor_update" not in kinds and "fuse_model_update" not in ran
    assert_same_bits(train_eager(kind, micro, optim), graph, f"{kind} {optim} ({update})")


@pytest.mark.timeout(60)
def test_gradient_accumulation_is_bit_identical_to_the_eager_micro_batch_loop(monkeypatch):
    # GPT with dropout: each micro-batch draws its own seeds, in the eager loop's order
    numpy_kernels_under_adamw(monkeypatch)
    graph = train_graph("gpt", micro=2)
    assert graph[0][0].shape == (2,)  # one loss per micro-batch
    assert_same_bits(train_eager("gpt", micro=2), graph, "gpt (2 micro-batches)")


@pytest.mark.timeout(60)
def test_gradient_accumulation_matches_a_full_batch_eager_step_within_1e6():
    # the one different order of arithmetic (module docstring): per-micro-batch means and
    # weight-gradient sums against whole-batch reductions; float32 rounding differs
    e_losses, e_state, _ = train_eager("mlp")
    g_losses, g_state, _, _ = train_graph("mlp", micro=2)
    np.testing.assert_allclose([float(np.mean(v)) for v in g_losses],
                               [float(v) for v in e_losses], rtol=1e-6, atol=0)
    for k in e_state:
        a, b = e_state[k].astype(np.float64), g_state[k].astype(np.float64)
        scale = max(float(np.abs(a).max()), 1e-30)
        assert float(np.abs(a - b).max()) <= 1e-6 * scale, k


@pytest.mark.timeout(60)
def test_gpt_with_activation_checkpointing_matches_eager():
    # recomputed forward ops (dropout included) reuse the seeds of the ops they recompute, so
    # the recomputation gives the very values eager's single forward gave
    e_losses, e_state, e_rng = train_eager("gpt")
    g_losses, g_state, g_rng, g = train_graph("gpt", checkpointing=True)
    recomputed = [o for o in g.full_job.ops if o.tags.get("seed_of")]
    assert {o.op_type for o in recomputed} == {"dropout"}  # the recomputed dropouts
    for a, b in zip(e_losses, g_losses):
        assert_graph_matches(b, a, "loss differs")
    for k in e_state:
        assert_graph_matches(g_state[k], e_state[k], k, atol=_state_atol(k, e_state[k]))
    assert np.array_equal(e_rng.numpy(), g_rng.numpy())


class _ManyRandom(nn.Module):
    """Random ops of several kinds, in a fixed order, some between deterministic ops."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.drop_a = nn.Dropout(0.3)
        self.drop_b = nn.Dropout(0.6)

    def forward(self, x):
        h = self.drop_a(self.lin(x))
        noise = flow.randn(*h.shape)
        h = self.drop_b(h + noise)
        u = flow.rand(*h.shape)
        return F.dropout(h * u, p=0.5), flow.bernoulli(u)


@pytest.mark.timeout(30)
def test_random_ops_draw_seeds_in_trace_order():
    """The graph draws one seed per random op per call from the global generator, in trace
    order: the order in which eager draws them."""
    flow.manual_seed(0)
    model = _ManyRandom()
    x = flow.randn(5, 6)

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = model

        def build(self, x):
            return self.m(x)

    g = G()
    for seed in (3, 4):
        flow.manual_seed(seed)
        with flow.no_grad():
            eager = [model(x) for _ in range(3)]
        eager_rng = flow.get_rng_state()
        flow.manual_seed(seed)
        graph = [g(x) for _ in range(3)]
        assert np.array_equal(flow.get_rng_state().numpy(), eager_rng.numpy())
        for e, r in zip(eager, graph):
            for a, b in zip(e, r):
                assert np.array_equal(a.numpy(), b.numpy())
        # different calls got different masks
        assert not np.array_equal(graph[0][0].numpy(), graph[1][0].numpy())
    random_ops = [o.op_type for o in g.full_job.ops
                  if o.op_type in ("dropout", "normal", "uniform", "bernoulli")]
    assert random_ops == ["dropout", "normal", "dropout", "uniform", "dropout", "bernoulli"]


@pytest.mark.timeout(30)
def test_in_place_writes_to_state_reach_the_eager_tensors():
    """``buf.add_()`` / ``buf.mul_()`` on a buffer (seen through the proxy as a lazy tensor)
    and on an eager tensor captured by build write back to the eager tensors, each write to
    the variable itself, as in eager mode."""

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c", flow.zeros(3))

        def forward(self, x):
            with flow.no_grad():
                self.c.add_(1)
                self.c.mul_(3)
            return x + self.c

    free_g, free_e = flow.zeros(3), flow.zeros(3)
    m_g, m_e = Counter(), Counter()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m_g

        def build(self, x):
            y = self.m(x)
            free_g.add_(2)
            free_g.mul_(2)
            return y + free_g

    g = G()
    x = flow.ones(3)
    for _ in range(3):
        out = g(x)
        with flow.no_grad():
            y = m_e(x)
            free_e.add_(2)
            free_e.mul_(2)
            ref = y + free_e
        assert np.array_equal(out.numpy(), ref.numpy())
    assert np.array_equal(m_g.c.numpy(), m_e.c.numpy())  # ((0+1)*3+1)*3+1)*3 = 39
    assert np.array_equal(free_g.numpy(), free_e.numpy())
    assert float(m_g.c.numpy()[0]) == 39.0
