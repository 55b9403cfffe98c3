"""nn.Graph on the actor runtime (the default executor), checked at the Graph level.

* Differential: the same training run on the actor runtime and on the reference executor
  (``ACTORFLOW_RUN_GRAPH_BY_VM=1``, chosen when a signature compiles) runs the same kernels in
  the same order on the same values, so losses and every parameter, buffer and optimizer state
  are bit-identical - for an MLP, a CNN and the GPT example, with gradient accumulation, AMP,
  activation checkpointing, fused updates, and the registered ``repeat`` op.
* Actors run on the threads their task ids name; shutdown, close and garbage collection leave
  no thread behind; a failing kernel names its op and module and the graph recovers; steady
  state allocates no op-output memory; the profiler's Chrome trace; eager code sees the state a
  graph call wrote; the compiled Plan round-trips through JSON.
"""
from __future__ import annotations

import gc
import json
import threading
import time
import tracemalloc

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow import profiler
from actorflow.compiler import Plan, decode_task_id
from actorflow.dispatch import apply
from actorflow.job.executor import ReferenceExecutor
from actorflow.runtime.executor import RuntimeExecutor
from examples.gpt import GPT
from tests.helpers import (assert_graph_matches, fail_if_negative_op, numpy_kernels_under_adamw,
                           slow_actors)

BY_VM = "ACTORFLOW_RUN_GRAPH_BY_VM"
STEPS = 5


def use(monkeypatch, executor: str) -> None:
    """Make graphs compiled from now on run on ``executor`` ("runtime" or "reference")."""
    if executor == "reference":
        monkeypatch.setenv(BY_VM, "1")
    else:
        monkeypatch.delenv(BY_VM, raising=False)


def settled_thread_count() -> int:
    """The thread count once runtimes left behind by earlier tests are collected."""
    n, deadline = -1, time.time() + 5
    while threading.active_count() != n and time.time() < deadline:
        n = threading.active_count()
        gc.collect()
        time.sleep(0.02)
    return threading.active_count()


def wait_thread_count(n: int, timeout: float = 5.0) -> int:
    deadline = time.time() + timeout
    while threading.active_count() != n and time.time() < deadline:
        time.sleep(0.01)
    return threading.active_count()


# ---- models --------------------------------------------------------------------------------------

class CNN(nn.Module):
    """conv, batch norm, relu, max pool, conv, batch norm, relu, avg pool, linear."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.bn2 = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


class Repeated(nn.Module):
    """A linear layer on the batch tiled twice with the registered ``repeat`` op."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x):
        return self.lin(x.repeat(2, 1))


def _setup(kind: str):
    """(model, optimizer, loss function), built from seed 0."""
    flow.manual_seed(0)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                              nn.Linear(16, 4))
        return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), _ce
    if kind == "cnn":
        model = CNN()
        return model, flow.optim.Adam(model.parameters(), lr=1e-2), _ce
    if kind == "repeat":
        model = Repeated()
        return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), \
            lambda m, x, y: F.cross_entropy(m(x), y.repeat(2))
    model = GPT(20, block_size=8, n_layer=2, n_head=2, n_embd=16, dropout=0.1)
    opt = flow.optim.AdamW([{"params": list(model.parameters()), "clip_grad_max_norm": 1.0,
                             "clip_grad_norm_type": 2.0}], lr=1e-2, weight_decay=0.01)
    return model, opt, lambda m, x, y: m(x, y)[1]


def _ce(m, x, y):
    return F.cross_entropy(m(x), y)


def _batch(kind: str, step: int):
    rng = np.random.default_rng(100 + step)
    if kind == "gpt":
        return tuple(flow.from_numpy(rng.integers(0, 20, (4, 8))) for _ in range(2))
    shape, classes = {"mlp": ((8, 12), 4), "cnn": ((4, 2, 8, 8), 3), "repeat": ((4, 6), 5)}[kind]
    x = rng.standard_normal(shape).astype(np.float32)
    return flow.from_numpy(x), flow.from_numpy(rng.integers(0, classes, shape[0]))


class TrainGraph(nn.Graph):
    """One training step of ``model``: loss, backward, ``opt``'s update; with the options."""

    def __init__(self, model, opt, loss_fn=None, *, acc: int = 1, amp: bool = False,
                 checkpointing: bool = False, fuse: bool = False):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn or _ce
        self.add_optimizer(opt)
        if acc > 1:
            self.config.set_gradient_accumulation_steps(acc)
        if amp:
            self.config.enable_amp(True, dtype=flow.float16)
        if fuse:
            self.config.allow_fuse_model_update_ops(True)
        if checkpointing:
            for block in self.model.blocks:
                block.to(nn.graph.GraphModule).activation_checkpointing = True

    def build(self, x, y):
        loss = self.loss_fn(self.model, x, y)
        loss.backward()
        return loss


def train_graph(kind: str, executor: str, monkeypatch, **opts):
    """Train ``kind`` for STEPS calls of a training graph on ``executor``; returns losses, the
    final model state, the optimizer state, the generator state and the graph."""
    model, opt, loss_fn = _setup(kind)
    use(monkeypatch, executor)  # before the first call: the executor is chosen at compile time
    g = TrainGraph(model, opt, loss_fn, **opts)
    flow.manual_seed(1)
    losses = [g(*_batch(kind, step)).numpy().copy() for step in range(STEPS)]
    expected = RuntimeExecutor if executor == "runtime" else ReferenceExecutor
    assert type(g._last.executor) is expected
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    opt_state = {f"{i}.{k}": v.numpy().copy()
                 for i, p in enumerate(model.parameters())
                 for k, v in opt.state.get(p, {}).items() if isinstance(v, flow.Tensor)}
    rng = flow.get_rng_state()
    g.close()
    return losses, state, opt_state, rng, g


# ---- 1. differential: actor runtime vs reference executor ----------------------------------------

CASES = [
    ("mlp", {}), ("cnn", {}), ("gpt", {}),
    ("mlp", {"acc": 2}), ("cnn", {"acc": 2}), ("gpt", {"acc": 2}),
    ("mlp", {"amp": True}), ("cnn", {"amp": True, "acc": 2}),
    ("gpt", {"checkpointing": True}),
    ("mlp", {"fuse": True}), ("cnn", {"fuse": True}),
    ("repeat", {}), ("repeat", {"acc": 2}),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind,opts", CASES,
                         ids=[k + "".join(f"-{o}" for o in opts) for k, opts in CASES])
def test_runtime_training_is_bit_identical_to_reference(kind, opts, monkeypatch):
    if kind in ("gpt", "cnn"):  # trained with AdamW / Adam (see the helper)
        numpy_kernels_under_adamw(monkeypatch)
    ref = train_graph(kind, "reference", monkeypatch, **opts)
    run = train_graph(kind, "runtime", monkeypatch, **opts)
    tol = 1e-3 if opts.get("amp") else 1e-5
    for step, (a, b) in enumerate(zip(ref[0], run[0])):
        # the reference executor runs the NumPy kernels, the runtime the generated ones;
        # under amp a libm-vs-NumPy ulp in float32 can flip a float16 rounding (2^-11)
        assert_graph_matches(b, a, f"{kind} {opts}: loss differs at step {step}", rtol=tol)
    for what, r, g in (("model", ref[1], run[1]), ("optimizer", ref[2], run[2])):
        assert r.keys() == g.keys()
        for k in r:
            assert_graph_matches(g[k], r[k], f"{kind} {opts}: {what} state {k} differs",
                                 rtol=tol, atol=tol / 10)
    # as many seeds drawn from the global generator
    assert np.array_equal(ref[3].numpy(), run[3].numpy())
    assert np.isfinite(np.array(run[0], dtype=np.float64)).all()
    job = run[4].full_job
    if opts.get("acc"):
        assert any(o.op_type == "micro_acc" for o in job.ops)
    if kind == "repeat":
        # the registered repeat op runs as a kernel, not as grad-acc's micro_repeat system task
        plan = run[4].plan
        names = [o.name for o in job.ops if o.op_type == "repeat"]
        assert names and all(plan.task_by_op(n).kind == "normal" for n in names)
        micro = [o.name for o in job.ops if o.op_type == "micro_repeat"]
        assert all(plan.task_by_op(n).kind == "repeat" for n in micro)
        assert bool(micro) == bool(opts.get("acc"))


# ---- helpers for the runtime tests ---------------------------------------------------------------

def mlp_graph(sizes=(12, 16, 4), acc: int = 1):
    """A training graph for an MLP of ``sizes`` (SGD with momentum), and its model."""
    flow.manual_seed(0)
    layers = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return TrainGraph(model, opt, acc=acc), model


def mlp_data(batch: int = 8, n_in: int = 12, n_out: int = 4, seed: int = 3):
    rng = np.random.default_rng(seed)
    return (flow.from_numpy(rng.standard_normal((batch, n_in)).astype(np.float32)),
            flow.from_numpy(rng.integers(0, n_out, batch)))


class Infer(nn.Graph):
    """An inference graph around ``module``."""

    def __init__(self, module):
        super().__init__()
        self.m = module

    def build(self, x):
        return self.m(x)


# ---- 2. threads ----------------------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_tasks_run_on_the_threads_their_task_ids_name(monkeypatch):
    use(monkeypatch, "runtime")
    g, _ = mlp_graph(acc=2)  # with grad-acc's repeat/unpack/acc/pack tasks too
    x, y = mlp_data()
    g(x, y)
    flow.synchronize()
    plan = g.plan
    stream = {t.task_id: decode_task_id(t.task_id).stream for t in plan.tasks}
    for t in plan.tasks:
        want = {"input": "io", "wait_and_send_ids": "source"}.get(t.kind, "compute")
        assert stream[t.task_id] == want, (t.op_name, t.kind, stream[t.task_id])
        assert t.thread_id == t.task_id >> 24 and decode_task_id(t.task_id).rank == 0
    assert [t.kind for t in plan.tasks if stream[t.task_id] == "source"] == ["wait_and_send_ids"]
    assert len(plan.thread_ids) == 3
    calls = 3
    with profiler.profile() as prof:
        for _ in range(calls):
            g(x, y)
        flow.synchronize()  # calls are asynchronous: let them finish inside the profile
    rt = g._last.executor.runtime
    names = rt.thread_names
    acts: dict = {}
    for e in prof.acts():
        assert e["runtime"] == id(rt)
        assert e["thread"] == f"actorflow-{names[e['actor']]}"
        assert e["thread"].endswith("/" + stream[e["actor"]]), e
        acts[e["actor"]] = acts.get(e["actor"], 0) + 1
    # every task (the source included) acted, as often as the plan says: per-micro-batch tasks
    # and the acc/pack tasks that consume them twice per call, the others once
    for t in plan.tasks:
        per_call = 2 if t.kind in ("acc", "pack") else t.time_shape
        assert acts.get(t.task_id, 0) == per_call * calls, (t.op_name, t.kind)
    g.close()


# ---- 3. shutdown ---------------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_many_graphs_created_run_and_deleted_leak_no_threads(monkeypatch):
    use(monkeypatch, "runtime")
    before = settled_thread_count()
    lin = nn.Linear(4, 3)
    x = flow.ones(2, 4)
    want = lin(x).numpy()
    during, after = set(), set()
    # objects that exist now can't be part of a graph's garbage: freezing them keeps each
    # gc.collect() below to the objects made since (fast), and changes nothing else
    gc.freeze()
    try:
        for _ in range(100):
            g = Infer(lin)
            assert np.array_equal(g(x).numpy(), want)
            during.add(threading.active_count())
            del g
            gc.collect()
            after.add(threading.active_count())
    finally:
        gc.unfreeze()
    assert during == {before + 3}  # source, io and compute threads of the one live graph
    assert wait_thread_count(before) == before
    assert after == {before}  # each graph's threads ended when it was collected


@pytest.mark.timeout(30)
def test_close_joins_the_threads_and_a_closed_graph_runs_again(monkeypatch):
    use(monkeypatch, "runtime")
    before = settled_thread_count()
    g, model = mlp_graph()
    x, y = mlp_data()
    g(x, y)
    flow.synchronize()  # the call is an asynchronous VM instruction
    rt = g._last.executor.runtime
    threads = [t.thread for t in rt.threads.values()]
    assert threading.active_count() == before + 3 and all(t.is_alive() for t in threads)
    g.close()
    assert not any(t.is_alive() for t in threads)  # joined by close, not left to finish later
    assert threading.active_count() == before
    assert g._last.executor.runtime is None
    g.close()  # closing twice is harmless
    w = model[0].weight.numpy().copy()
    loss = g(x, y)  # a fresh runtime
    assert np.isfinite(loss.numpy()) and g._last.executor.runtime is not rt
    assert not np.array_equal(w, model[0].weight.numpy())  # it trained
    assert threading.active_count() == before + 3
    g.close()
    assert threading.active_count() == before


# ---- 4. a failing kernel -------------------------------------------------------------------------

class Checked(nn.Module):
    def forward(self, x):  # the op as a module's forward calls it: it gets the module path
        return apply(fail_if_negative_op(), [x], {})[0]


class CheckedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.check = Checked()

    def forward(self, x):
        return self.check(self.lin(x)) * 2.0


@pytest.mark.timeout(30)
def test_failing_kernel_names_op_and_module_and_the_graph_recovers(monkeypatch):
    use(monkeypatch, "runtime")
    before = settled_thread_count()
    net = CheckedNet()
    with flow.no_grad():
        net.lin.weight.copy_(flow.eye(4))
        net.lin.bias.zero_()
    g = Infer(net)
    good, bad = flow.ones(2, 4), -flow.ones(2, 4)
    assert np.array_equal(g(good).numpy(), np.full((2, 4), 2.0, np.float32))
    rt = g._last.executor.runtime
    t0 = time.perf_counter()
    # the call is asynchronous: its error comes at the outputs' sync point (in blocking mode,
    # at the call)
    with pytest.raises(RuntimeError, match=r"_test_fail_if_negative.*"
                                           r"module m\.check\b.*ValueError: negative input"):
        g(bad).numpy()
    assert time.perf_counter() - t0 < 5
    assert rt.aborted
    rt.join(5)
    assert not any(t.thread.is_alive() for t in rt.threads.values())
    assert wait_thread_count(before) == before  # the failed runtime's threads are gone
    # the same graph runs again (a fresh runtime), without recompiling
    assert np.array_equal(g(good).numpy(), np.full((2, 4), 2.0, np.float32))
    assert g._last.executor.runtime is not rt and g.compile_count == 1
    assert threading.active_count() == before + 3
    with pytest.raises(RuntimeError, match="negative input"):  # and fails again, cleanly
        g(bad).numpy()
    assert np.array_equal(g(2 * good).numpy(), np.full((2, 4), 4.0, np.float32))
    g.close()
    assert threading.active_count() == before


# ---- 5. steady state allocates no op outputs -----------------------------------------------------

@pytest.mark.timeout(60)
def test_training_steady_state_allocates_no_op_output_memory(monkeypatch):
    use(monkeypatch, "runtime")
    g, model = mlp_graph((64, 128, 128, 10))
    x, y = mlp_data(32, 64, 10)
    for _ in range(5):  # warm-up: compile, start the runtime, create optimizer state
        g(x, y)
    flow.synchronize()
    rt = g._last.executor.runtime
    blocks = [id(b) for b in rt.blocks]
    numpy_only = [tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(100):
            loss = g(x, y)
        flow.synchronize()
        gc.collect()  # each call leaves some cyclic garbage (closures); not what we measure
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert np.isfinite(loss.numpy())
    assert g._last.executor.runtime is rt and [id(b) for b in rt.blocks] == blocks

    def growth(a, b) -> tuple:
        diff = a.compare_to(b, "lineno")
        return sum(s.size_diff for s in diff if s.size_diff > 0), [str(s) for s in diff[:5]]

    grown_numpy, top_numpy = growth(after.filter_traces(numpy_only),
                                    before.filter_traces(numpy_only))
    grown_all, top_all = growth(after, before)
    # Op outputs live in register memory allocated once when the runtime started, so 100 more
    # iterations keep no new array data (numpy's tracemalloc domain, where every array's data
    # is traced): what remains is a few 0-d arrays (the caller's last loss, the source's ids
    # registers), tens of bytes. One (32, 128) float32 activation is 16 KiB, so keeping even
    # one per iteration would grow this by 1.6 MB; the bound, 1 KiB, is below one activation
    # in total. All Python allocations together get 8 activations' worth: dict resizes, free
    # lists, tracemalloc's own bookkeeping (~10 KB) and the VM's record of each call as a reader
    # of the parameters it only reads (~170 B per call; the lists are pruned at powers of two,
    # so they stay bounded, but up to ~100 finished calls can sit there between prunes).
    activation = 32 * 128 * 4
    assert grown_numpy < 1024, top_numpy
    assert grown_all < 8 * activation, top_all
    g.close()


# ---- 6. profiler ---------------------------------------------------------------------------------

def _load_trace(prof, tmp_path):
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)


@pytest.mark.timeout(30)
def test_chrome_trace_of_graph_calls(monkeypatch, tmp_path):
    use(monkeypatch, "runtime")
    g, _ = mlp_graph()
    x, y = mlp_data()
    g(x, y)
    flow.synchronize()
    calls = 3
    with profiler.profile() as prof:
        for _ in range(calls):
            g(x, y)
        flow.synchronize()
    plan, rt = g.plan, g._last.executor.runtime
    trace = _load_trace(prof, tmp_path)
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 0}
    assert sorted(names.values()) == sorted(f"actorflow-{t.name}" for t in rt.threads.values())
    slices = [e for e in events if e["ph"] == "X" and e["pid"] == 0]
    assert len(slices) == len(prof.acts())  # one slice per act
    # process 1 is the VM: each call is one launch instruction there
    launches = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert [e["name"] for e in launches] == [f"{g.name}-call"] * calls
    assert all(e["cat"] == "vm" and e["args"]["stream"] == "launch" for e in launches)
    by_task: dict = {}
    for e in slices:
        task = plan.task(e["args"]["actor"])
        assert e["name"] == task.op_name and e["cat"] == task.kind
        assert names[e["tid"]].endswith("/" + decode_task_id(task.task_id).stream)
        by_task.setdefault(task.task_id, []).append(e["args"]["iteration"])
    first = min(min(v) for v in by_task.values())
    iterations = list(range(first, first + calls))
    for t in plan.tasks:  # every task acted once per call
        assert sorted(by_task.get(t.task_id, [])) == iterations, t.op_name
    # flow arrows: one per (regst desc, consumer, call), from inside the producer's slice to
    # the start of the consumer's slice of the same call
    starts = [e for e in events if e["ph"] == "s"]
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == len(ends) == calls * sum(len(r.consumers)
                                                   for r in plan.regst_descs.values())
    edges = {(r.producer, c) for r in plan.regst_descs.values() for c in r.consumers}
    pairs = set()
    for s in starts:
        f = ends[s["id"]]
        assert f["ts"] >= s["ts"]  # a consumer acts after its producer
        src = [e for e in slices
               if e["tid"] == s["tid"] and e["ts"] <= s["ts"] <= e["ts"] + e["dur"]]
        dst = [e for e in slices if e["tid"] == f["tid"] and e["ts"] == f["ts"]]
        assert len(src) == 1 and dst
        hits = [(src[0]["args"]["actor"], d["args"]["actor"]) for d in dst
                if d["args"]["iteration"] == src[0]["args"]["iteration"]
                and (src[0]["args"]["actor"], d["args"]["actor"]) in edges]
        assert hits, (s, f)
        pairs.add((hits[0], src[0]["args"]["iteration"]))
    assert len(pairs) == len(starts)  # no arrow drawn twice
    g.close()


@pytest.mark.timeout(30)
def test_trace_shows_the_next_input_overlapping_this_compute(monkeypatch, tmp_path):
    use(monkeypatch, "runtime")
    flow.manual_seed(0)
    g = Infer(nn.Linear(4, 4))
    x = flow.randn(2, 4)
    want = g(x).numpy()  # compiles; the graph call waits for its result
    slow_actors(monkeypatch)
    compiled = g._last
    with profiler.profile() as prof:
        futs = [compiled.executor.launch([x.numpy()], compiled.bindings) for _ in range(4)]
        outs = [f.result(10) for f in futs]
    for out in outs:
        assert np.array_equal(out[0], want)
    events = _load_trace(prof, tmp_path)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    inputs = [e for e in slices if e["cat"] == "input"]
    computes = [e for e in slices if e["cat"] == "normal"]
    assert inputs and computes
    assert all(names[e["tid"]].endswith("/io") for e in inputs)
    assert all(names[e["tid"]].endswith("/compute") for e in computes)
    overlapping = [(i["args"]["iteration"], c["name"]) for i in inputs for c in computes
                   if i["args"]["iteration"] == c["args"]["iteration"] + 1
                   and i["ts"] < c["ts"] + c["dur"] and c["ts"] < i["ts"] + i["dur"]]
    assert overlapping, "an input act of call k+1 should overlap a compute act of call k"
    g.close()


# ---- 7. eager code sees what a graph call wrote --------------------------------------------------

def _eager_reads(executor: str, monkeypatch) -> list:
    """Train 4 calls; after each, read parameters and optimizer state eagerly (and after the
    second, change a weight eagerly, which the next call must see)."""
    use(monkeypatch, executor)
    g, model = mlp_graph()
    opt = g._optimizers[0].optimizer
    x, y = mlp_data()
    w = model[0].weight
    seen = []
    for step in range(4):
        loss = g(x, y)
        seen.append((loss.numpy().copy(), w.numpy().copy(), (w * 1.0).numpy(),
                     float(model[2].bias.sum()), opt.state[w]["momentum_buffer"].numpy().copy()))
        if step == 1:
            with flow.no_grad():
                w.mul_(0.5)
    g.close()
    return seen


@pytest.mark.timeout(30)
def test_eager_reads_after_a_call_see_the_update(monkeypatch):
    ref = _eager_reads("reference", monkeypatch)
    run = _eager_reads("runtime", monkeypatch)
    for step, (a, b) in enumerate(zip(ref, run)):
        for i, (u, v) in enumerate(zip(a, b)):  # the reference runs no generated kernels
            assert_graph_matches(v, u, f"step {step}, value {i}")
    for step in range(1, 4):  # every call changed the weight
        assert not np.array_equal(run[step][1], run[step - 1][1])


# ---- 8. the Plan ---------------------------------------------------------------------------------

@pytest.mark.timeout(30)
def test_plan_of_a_graph_round_trips_and_shares_memory(monkeypatch):
    use(monkeypatch, "runtime")
    x, y = mlp_data()
    plans = {}
    for acc in (1, 2):
        g, _ = mlp_graph(acc=acc)
        g(x, y)
        plans[acc] = g.plan
        assert g.plan is g._last.executor.plan  # the Plan the runtime runs
        g.close()
    for plan in plans.values():
        again = Plan.from_json(plan.to_json())
        assert again == plan and again.to_json() == plan.to_json()
        dot = plan.to_dot()
        assert dot.startswith("digraph") and dot.rstrip().endswith("}")
        assert dot.count("subgraph cluster_thread_") == len(plan.thread_ids) == 3
        for name in ("compute", "io", "source"):
            assert f'label="thread rank0/cpu:0/{name}"' in dot
        assert dot.count(" -> ") == sum(len(r.consumers) for r in plan.regst_descs.values())
    mem = plans[1].memory
    assert 0 < mem["bytes_with_sharing"] < mem["bytes_without_sharing"]
    assert mem["bytes_with_sharing"] == sum(mem["blocks"])
    # a micro-batch stage's registers live across acts: grad-acc tasks get memory of their own
    acc_tasks = [t for t in plans[2].tasks if t.kind in ("acc", "repeat", "unpack", "pack")]
    assert acc_tasks and plans[2].io["accumulation_steps"] == 2
