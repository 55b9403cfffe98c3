"""The training passes of nn.Graph: AMP (with the GradScaler), gradient accumulation,
activation checkpointing, and the Job memory accounting that shows checkpointing's saving."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.job.executor import ReferenceExecutor
from actorflow.job.schedule import stage_of
from actorflow.job.job import BlobDesc, Job, OpConf
from actorflow.job.memory import blob_lifetimes, job_memory
from actorflow.passes.grad_acc import GradientAccumulationError
from tests.helpers import assert_graph_matches

FUSIONS = ("fuse_matmul_bias_act", "fuse_elementwise")


def mlp(dropout: float = 0.0, seed: int = 0):
    flow.manual_seed(seed)
    layers = [nn.Linear(8, 16), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(16, 4))


def train_graph(model, opt, *, amp=None, acc=1, checkpoint=(), disable=(), outputs=False):
    class TrainGraph(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            if amp is not None:
                self.config.enable_amp(True, dtype=amp)
            if acc > 1:
                self.config.set_gradient_accumulation_steps(acc)
            for i in checkpoint:
                self.model[i].to(nn.graph.GraphModule).activation_checkpointing = True
            for name in disable:
                self.config.disable_pass(name)

        def build(self, x, y):
            out = self.model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            return (out, loss) if outputs else loss

    return TrainGraph()


def data(batch=16, seed=3):
    flow.manual_seed(seed)
    return flow.randn(batch, 8), flow.randint(0, 4, (batch,))


def ops_of(job, op_type):
    return [o for o in job.ops if o.op_type == op_type]


def same_params(a, b) -> bool:
    return all(np.array_equal(p.numpy(), q.numpy()) for p, q in zip(a.parameters(),
                                                                      b.parameters()))


def params_match_eager(graph_model, eager_model) -> bool:
    """A graph-trained model's parameters against eager's (``assert_graph_matches``: the same
    bits with generated kernels off, float32 rounding with them on: cross_entropy's row
    kernel sums in another order)."""
    for p, q in zip(graph_model.parameters(), eager_model.parameters()):
        assert_graph_matches(p.numpy(), q.numpy(), "parameter differs from eager")
    return True


# ---- AMP ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16])
def test_amp_inference_equals_eager_with_hand_casts(dtype):
    m = mlp()
    x, _ = data()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m
            self.config.enable_amp(True, dtype=dtype)

        def build(self, x):
            return F.softmax(self.model(x), dim=-1)

    g = G()
    out = g(x)
    h = [t.to(dtype) for t in (x, m[0].weight, m[0].bias, m[2].weight, m[2].bias)]
    ref = F.softmax(F.linear(F.relu(F.linear(h[0], h[1], h[2])), h[3], h[4]).float(), dim=-1)
    assert out.dtype == flow.float32  # softmax is black-listed: it runs in float32
    # same casts, same kernels (the graph's softmax a generated row kernel: within float32)
    assert_graph_matches(out.numpy(), ref.numpy(), "amp inference")
    assert not ops_of(g.forward_job, "cast")
    job = g.full_job
    assert {o.outputs[0].dtype for o in ops_of(job, "cast")} == {dtype, flow.float32}
    for o in job.ops:  # matmul-like ops read half precision only
        if o.op_type in ("linear", "fused_matmul_bias_act"):
            assert {job.blob_desc(b).dtype for b in o.inputs} == {dtype}
        if o.op_type == "softmax":
            assert job.blob_desc(o.inputs[0]).dtype == flow.float32


def test_amp_pass_off_or_amp_off_leaves_float32():
    m = mlp()
    x, y = data()
    ref = copy.deepcopy(m)
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), amp=flow.float16,
                    disable=("amp",))
    g(x, y)
    assert not ops_of(g.full_job, "cast") and not hasattr(g, "_grad_scaler")
    assert "_grad_scaler" not in g.state_dict()
    opt = flow.optim.SGD(ref.parameters(), lr=0.1)
    F.cross_entropy(ref(x), y).backward()
    opt.step()
    assert params_match_eager(m, ref)


@pytest.mark.parametrize("dtype,loss_tol,param_tol", [
    # fp16 keeps 11 significant bits (unit roundoff 2**-11 ~ 4.9e-4): inputs and weights are
    # rounded and dot products of length 8-16 add a few roundoffs per layer, so 10 SGD steps
    # stay within ~1e-4 of float32 in the loss (measured 5e-5) and ~1e-3 in the parameters
    (flow.float16, 1e-3, 5e-3),
    # bfloat16 keeps 8 bits (2**-8 ~ 3.9e-3): 8x the fp16 bounds (measured 4e-4 and 1.5e-2)
    (flow.bfloat16, 8e-3, 5e-2)])
def test_amp_training_tracks_float32_eager(dtype, loss_tol, param_tol):
    m = mlp()
    ref = copy.deepcopy(m)
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), amp=dtype)
    opt = flow.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    for _ in range(10):
        loss = g(x, y)
        ref_loss = F.cross_entropy(ref(x), y)
        opt.zero_grad()
        ref_loss.backward()
        opt.step()
        assert loss.dtype == flow.float32
        assert abs(loss.item() - ref_loss.item()) <= loss_tol * abs(ref_loss.item())
    for p, q in zip(m.parameters(), ref.parameters()):
        assert np.abs(p.numpy() - q.numpy()).max() <= param_tol * np.abs(q.numpy()).max()
    job = g.full_job
    for o in job.ops:  # updates read float32 gradients
        if o.op_type == "momentum_update":
            assert job.blob_desc(o.inputs[1]).dtype == flow.float32
    assert all(job.blob_desc(b).dtype == flow.float32 for b in job.train["grads"].values())
    assert hasattr(g, "_grad_scaler") == (dtype == flow.float16)  # bf16 needs no scaler


def test_amp_job_before_after():
    m = mlp()
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), amp=flow.float16,
                    disable=FUSIONS)
    g(*data())
    entry = next(e for e in g.pass_log if e["name"] == "amp")
    assert any("amp_cast_float16" in n for n in entry["added"])
    assert any("amp_cast_float32" in n for n in entry["added"])
    job = g.full_job
    # the weight is cast once and read by the forward linear and the backward matmul
    w16 = next(o for o in job.ops if o.name == "model.2.weight-amp_cast_float16")
    readers = [o.op_type for o in job.ops if w16.out(0) in o.inputs]
    assert readers == ["linear", "matmul"]
    # the seed gradient is multiplied by the loss scale
    seed = next(o for o in job.ops if o.tags.get("grad_root"))
    scaled = [o for o in job.ops if seed.out(0) in o.inputs]
    assert [o.op_type for o in scaled] == ["mul"]
    assert "_grad_scaler.scale/0" in scaled[0].inputs
    for o in job.ops:
        if o.op_type == "sgd_update":
            assert o.attrs["skip_if"] and job.blob_desc(o.inputs[-1]).dtype == flow.bool
    assert Job.from_json(job.to_json()) == job


def _scaler_graph(optimizer="sgd", fuse=None):
    m = mlp()
    opt = (flow.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
           else flow.optim.Adam(m.parameters(), lr=0.01))
    g = train_graph(m, opt, amp=flow.float16)
    if fuse is not None:  # else the default (fused)
        g.config.allow_fuse_model_update_ops(fuse)
    return m, opt, g


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the inf input makes NaNs on purpose
@pytest.mark.parametrize("optimizer,fuse", [("sgd", False), ("sgd", True), ("adam", False),
                                            ("adam", True)])
def test_grad_scaler_skips_non_finite_steps_and_backs_off(optimizer, fuse):
    m, opt, g = _scaler_graph(optimizer, fuse)
    x, y = data()
    for _ in range(3):
        g(x, y)
    if fuse:  # the fused multi-tensor update passes the skip flag on to each update
        assert [o.op_type for o in g.full_job.ops if "update" in o.op_type] == \
            ["multi_tensor_update"]
    scaler = g._grad_scaler
    assert scaler.state_dict()["scale"] == 2.0 ** 16
    assert scaler.state_dict()["growth_tracker"] == 3
    params = [p.numpy().copy() for p in m.parameters()]
    state = {k: v.numpy().copy() for s in opt.state.values() for k, v in s.items()}
    bad = x.numpy().copy()
    bad[0, 0] = np.inf
    loss = g(flow.tensor(bad), y)
    assert not np.isfinite(loss.item())
    for p, before in zip(m.parameters(), params):  # the update was skipped
        np.testing.assert_array_equal(p.numpy(), before)
    after = {k: v.numpy() for s in opt.state.values() for k, v in s.items()}
    for k in state:
        np.testing.assert_array_equal(after[k], state[k])
    assert scaler.state_dict()["scale"] == 2.0 ** 15
    assert scaler.state_dict()["growth_tracker"] == 0
    g(x, y)  # a finite step updates again
    assert not np.array_equal(next(iter(m.parameters())).numpy(), params[0])
    assert scaler.state_dict()["growth_tracker"] == 1


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the inf input makes NaNs on purpose
@pytest.mark.parametrize("acc", [1, 2])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_grad_scaler_training_is_the_same_with_update_fusion_on_and_off(optimizer, acc):
    # fuse_model_update is on by default; the fused updates pass the GradScaler's skip flag on,
    # so a skipped (non-finite) step and the finite ones give the same bits as unfused updates
    x, y = data()
    bad = x.numpy().copy()
    bad[0, 0] = np.inf
    batches = [x, x * 0.5, flow.tensor(bad), x * 2.0]
    runs = []
    for fuse in (True, False):
        m, opt, g = _scaler_graph(optimizer)
        if acc > 1:
            g.config.set_gradient_accumulation_steps(acc)
        if not fuse:  # on is the default
            g.config.disable_pass("fuse_model_update")
        losses = [g(b, y).numpy().copy() for b in batches]
        kinds = [o.op_type for o in g.full_job.ops if "update" in o.op_type]
        assert (kinds == ["multi_tensor_update"]) if fuse else ("multi_tensor_update" not in kinds)
        state = [v.numpy().copy() for s in opt.state.values() for v in s.values()]
        runs.append((losses, [p.numpy().copy() for p in m.parameters()], state,
                     g._grad_scaler.state_dict()))
    (l1, p1, s1, sc1), (l2, p2, s2, sc2) = runs
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(l1, l2))
    assert all(np.array_equal(a, b) for a, b in zip(p1 + s1, p2 + s2))
    assert sc1 == sc2 and sc1["scale"] == 2.0 ** 15  # the inf step was skipped, in both


def test_grad_scaler_growth_and_state_dict():
    m, opt, g = _scaler_graph()
    x, y = data()
    g(x, y)
    sd = g.state_dict()
    assert sd["_grad_scaler"]["scale"] == 2.0 ** 16
    sd["_grad_scaler"]["growth_tracker"] = 1999  # the next finite step is the 2000th
    g.load_state_dict(sd)
    g(x, y)
    assert g._grad_scaler.state_dict()["scale"] == 2.0 ** 17
    assert g._grad_scaler.state_dict()["growth_tracker"] == 0
    g(x, y)
    assert g._grad_scaler.state_dict()["growth_tracker"] == 1


def test_grad_scaler_unscales_exactly():
    # loss scales are powers of two, so scaling and unscaling is exact: two scales that neither
    # overflow nor underflow float16 give bit-identical training
    runs = []
    for scale in (2.0 ** 16, 2.0 ** 4):
        m, opt, g = _scaler_graph()
        g.state_dict()  # makes the scaler
        g._grad_scaler.scale._array()[...] = scale
        x, y = data()
        losses = [g(x, y).item() for _ in range(3)]
        runs.append((losses, m))
    assert runs[0][0] == runs[1][0]
    assert same_params(runs[0][1], runs[1][1])


# ---- gradient accumulation -------------------------------------------------------------------

def _eager_accumulation(model, opt, x, y, n, steps):
    k = x.shape[0] // n
    results = []
    for _ in range(steps):
        outs, losses = [], []
        for i in range(n):
            out = model(x[i * k:(i + 1) * k])
            loss = F.cross_entropy(out, y[i * k:(i + 1) * k])
            (loss / n).backward()
            outs.append(out.detach())
            losses.append(loss.detach())
        opt.step()
        opt.zero_grad()
        results.append((flow.cat(outs), flow.stack(losses)))
    return results


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_grad_acc_equals_eager_micro_batch_loop_with_dropout(optimizer):
    m = mlp(dropout=0.3)
    ref = copy.deepcopy(m)

    def make(model):
        return (flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
                else flow.optim.Adam(model.parameters(), lr=0.01))

    g = train_graph(m, make(m), acc=4, outputs=True)
    x, y = data()
    flow.manual_seed(7)
    got = [g(x, y) for _ in range(3)]
    flow.manual_seed(7)
    want = _eager_accumulation(ref, make(ref), x, y, 4, 3)
    for (out, loss), (ref_out, ref_loss) in zip(got, want):
        assert tuple(out.shape) == (16, 4) and tuple(loss.shape) == (4,)  # concatenated
        assert_graph_matches(out.numpy(), ref_out.numpy(), "output")
        assert_graph_matches(loss.numpy(), ref_loss.numpy(), "loss")
    assert params_match_eager(m, ref)  # same ops, same order, same seeds


def test_grad_acc_job_before_after():
    m = mlp()
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), acc=2, outputs=True)
    g(*data())
    fwd, job = g.forward_job, g.full_job
    assert [o.outputs[0].shape for o in ops_of(fwd, "micro_unpack")] == [(8, 8), (8,)]
    assert not ops_of(fwd, "micro_repeat") and not ops_of(fwd, "micro_acc")
    assert job.train["accumulation_steps"] == 2
    stages = {o.name: o.tags["stage"] for o in job.ops}
    for o in job.ops:
        assert stages[o.name] == {"input": "pre", "variable": "pre", "output": "post"}.get(
            o.op_type, "post" if o.tags.get("phase") == "optimizer" else "micro")
    # variables reach the micro steps through repeat, gradients leave through acc
    assert {o.inputs[0].split("/")[0] for o in ops_of(job, "micro_repeat")} == \
        {"model.0.weight", "model.0.bias", "model.2.weight", "model.2.bias"}
    accs = {o.out(0) for o in ops_of(job, "micro_acc")}
    assert set(job.train["grads"].values()) == accs
    assert [o.outputs[0].shape for o in ops_of(job, "micro_pack")] == [(16, 4), (2,)]
    assert [o.outputs[0].shape for o in job.outputs] == [(16, 4), (2,)]
    assert stage_of(job) == stages


def test_grad_acc_with_amp_accumulates_float32_gradients():
    m = mlp(dropout=0.2)
    ref = copy.deepcopy(m)
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), amp=flow.float16, acc=2)
    x, y = data()
    flow.manual_seed(5)
    losses = [g(x, y) for _ in range(3)]
    job = g.full_job
    assert {o.outputs[0].dtype for o in ops_of(job, "micro_acc")} == {flow.float32}
    assert g._grad_scaler.state_dict()["growth_tracker"] == 3
    # the loss scale is applied per micro step, the unscale once on the accumulated gradient
    rep = next(o for o in ops_of(job, "micro_repeat") if o.inputs == ["_grad_scaler.scale/0"])
    assert [(o.op_type, o.tags["stage"]) for o in job.ops if rep.out(0) in o.inputs] == \
        [("mul", "micro")]
    ref_g = train_graph(ref, flow.optim.SGD(ref.parameters(), lr=0.1), acc=2)
    flow.manual_seed(5)  # the same dropout masks
    ref_losses = [ref_g(x, y) for _ in range(3)]
    for a, b in zip(losses, ref_losses):  # float16 bounds, as in the AMP training test
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3)


def test_grad_acc_pass_off_runs_the_whole_batch():
    m = mlp()
    ref = copy.deepcopy(m)
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), acc=4,
                    disable=("gradient_accumulation",))
    x, y = data()
    loss = g(x, y)
    assert tuple(loss.shape) == () and not ops_of(g.full_job, "micro_unpack")
    opt = flow.optim.SGD(ref.parameters(), lr=0.1)
    ref_loss = F.cross_entropy(ref(x), y)
    ref_loss.backward()
    opt.step()
    assert_graph_matches(loss.item(), ref_loss.item(), "loss")
    assert params_match_eager(m, ref)


@pytest.mark.timeout(10)
def test_grad_acc_errors():
    m = mlp()
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1), acc=3)
    with pytest.raises(GradientAccumulationError, match=r"shape \(16, 8\).*16 is not divisible"):
        g(*data())

    class Scalar(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m
            self.add_optimizer(flow.optim.SGD(m.parameters(), lr=0.1))
            self.config.set_gradient_accumulation_steps(2)

        def build(self, x, s):
            loss = self.model(x).sum() * s
            loss.backward()
            return loss

    with pytest.raises(GradientAccumulationError, match="input s is a 0-d tensor"):
        Scalar()(flow.randn(4, 8), flow.tensor(2.0))


def test_executor_infers_stages_of_untagged_ops():
    f32 = flow.float32
    d = BlobDesc((2, 3), f32)
    job = Job("j", [
        OpConf("x", "input", [], {"index": 0}, [BlobDesc((4, 3), f32)], tags={"stage": "pre"}),
        OpConf("u", "micro_unpack", ["x/0"], {"n": 2}, [d], tags={"stage": "micro"}),
        OpConf("e", "exp", ["u/0"], {}, [d]),                       # untagged: micro
        OpConf("a", "micro_acc", ["e/0"], {"n": 2}, [d], tags={"stage": "micro"}),
        OpConf("s", "sum", ["a/0"], {"dim": None, "keepdim": False}, [BlobDesc((), f32)]),
        OpConf("o", "output", ["s/0"], {"index": 0}, [BlobDesc((), f32)]),
    ], {"accumulation_steps": 2})
    job.verify()
    assert stage_of(job) == {"x": "pre", "u": "micro", "e": "micro", "a": "micro",
                             "s": "post", "o": "post"}
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    (out,) = ReferenceExecutor(job).run([x], {})
    want = (np.exp(x[:2]) + np.exp(x[2:])).sum(dtype=np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-6)


# ---- activation checkpointing ------------------------------------------------------------------

def deep_mlp(layers=16, per_block=2, width=64, dropout=0.0, seed=0):
    flow.manual_seed(seed)
    blocks = []
    for _ in range(layers // per_block):
        mods = []
        for _ in range(per_block):
            mods += [nn.Linear(width, width), nn.ReLU()]
            if dropout:
                mods.append(nn.Dropout(dropout))
        blocks.append(nn.Sequential(*mods))
    return nn.Sequential(*blocks)


def deep_graph(model, checkpoint: bool, **kw):
    class Deep(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
            if checkpoint:
                for block in self.model:
                    block.to(nn.graph.GraphModule).activation_checkpointing = True
            for name in kw.get("disable", ()):
                self.config.disable_pass(name)
            if kw.get("acc", 1) > 1:
                self.config.set_gradient_accumulation_steps(kw["acc"])
            if kw.get("amp"):
                self.config.enable_amp(True)

        def build(self, x):
            loss = self.model(x).square().mean()
            loss.backward()
            return loss

    return Deep()


@pytest.mark.parametrize("kw", [{}, {"acc": 2}, {"amp": True}])
def test_checkpointing_is_bit_identical_with_dropout(kw):
    runs = []
    for ck in (False, True):
        m = deep_mlp(layers=8, width=16, dropout=0.2)
        g = deep_graph(m, ck, **kw)
        x = flow.tensor(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
        flow.manual_seed(11)
        runs.append(([g(x).numpy() for _ in range(3)], m, g))
    (l0, m0, _), (l1, m1, g1) = runs
    assert [a.tolist() for a in l0] == [a.tolist() for a in l1]
    assert same_params(m0, m1)
    clones = [o for o in g1.full_job.ops if "recompute_of" in o.tags]
    assert any(o.op_type == "dropout" and "seed_of" in o.tags for o in clones)


def test_checkpointing_job_before_after():
    m = deep_mlp(layers=4, per_block=2, width=8)
    g = deep_graph(m, True, disable=FUSIONS)
    g(flow.randn(4, 8))
    fwd, job = g.forward_job, g.full_job
    assert {o.tags.get("checkpointing") for o in fwd.ops
            if o.tags.get("phase") == "forward" and o.scope.startswith("model.")} == \
        {"model.0", "model.1"}
    clones = [o for o in job.ops if "recompute_of" in o.tags]
    # block 0's output is block 1's input (a checkpoint, kept): only its first layer is
    # recomputed; the last block's output is not a checkpoint, so all of block 1 is
    assert sorted((o.tags["recompute_of"].split("-")[0], o.op_type) for o in clones) == [
        ("model.0.0", "linear"), ("model.0.1", "relu"),
        ("model.1.0", "linear"), ("model.1.1", "relu"),
        ("model.1.2", "linear"), ("model.1.3", "relu")]
    pos = {o.name: i for i, o in enumerate(job.ops)}
    first_backward = min(pos[o.name] for o in job.ops if o.tags.get("phase") == "backward")
    originals = {o.tags["recompute_of"] for o in clones}
    for o in job.ops:
        for b in o.inputs:
            if b.split("/")[0] in originals:  # originals are read only in the forward now
                assert o.tags.get("phase") == "forward", o.name
    for c in clones:
        assert pos[c.name] >= first_backward and c.tags["phase"] == "backward"
        readers = [pos[o.name] for o in job.ops if c.out(0) in o.inputs]
        assert readers and min(readers) > pos[c.name]
    g2 = deep_graph(deep_mlp(layers=4, per_block=2, width=8), True,
                    disable=("activation_checkpointing",))
    g2(flow.randn(4, 8))
    assert not any("recompute_of" in o.tags for o in g2.full_job.ops)


def test_checkpointing_does_not_recompute_running_stat_updates():
    def run(ck):
        flow.manual_seed(0)
        m = nn.Sequential(nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU(),
                                        nn.Linear(6, 6), nn.ReLU()))
        g = deep_graph(m, ck)
        x = flow.randn(5, 6)
        losses = [g(x).item() for _ in range(2)]
        return losses, m, g

    l0, m0, _ = run(False)
    l1, m1, g1 = run(True)
    assert l0 == l1 and same_params(m0, m1)
    np.testing.assert_array_equal(m0[0][1].running_mean.numpy(), m1[0][1].running_mean.numpy())
    assert not any(o.tags.get("recompute_of", "").endswith("batch_norm")
                   for o in g1.full_job.ops if o.op_type == "batch_norm")


def test_checkpointing_saves_peak_memory_on_a_deep_mlp():
    reports, losses = [], []
    for ck in (False, True):
        m = deep_mlp(layers=16, per_block=2, width=32)
        g = deep_graph(m, ck)
        losses.append(g(flow.tensor(np.ones((64, 32), np.float32))).item())
        reports.append(job_memory(g.full_job))
    plain, ckpt = reports
    assert losses[0] == losses[1]
    # deterministic accounting: 16 layers, batch 64 x width 32 (8 KiB per activation);
    # checkpointing each 2-layer block keeps block outputs only, recomputing the rest
    assert ckpt.peak_bytes < 0.7 * plain.peak_bytes
    assert ckpt.state_bytes == plain.state_bytes and ckpt.input_bytes == plain.input_bytes
    assert ckpt.allocated_bytes > plain.allocated_bytes  # the recomputation's extra blobs


def test_memory_accounting_by_hand():
    f32 = flow.float32
    d = BlobDesc((10,), f32)  # 40 bytes
    job = Job("m", [
        OpConf("w", "variable", [], {"name": "w", "kind": "parameter"}, [d]),
        OpConf("x", "input", [], {"index": 0}, [d]),
        OpConf("r", "micro_repeat", ["w/0"], {"n": 1}, [d]),
        OpConf("a", "exp", ["x/0"], {}, [d]),           # a: ops 3..5
        OpConf("b", "mul", ["a/0", "r/0"], {}, [d]),    # b: 4..7 (read by the output)
        OpConf("c", "exp", ["a/0"], {}, [d]),           # c: 5..6
        OpConf("e", "exp", ["c/0"], {}, [d]),           # e: 6..6 (never read)
        OpConf("o", "output", ["b/0"], {"index": 0}, [d]),
    ])
    rep = job_memory(job)
    assert rep.timeline == [0, 0, 0, 40, 80, 120, 120, 40]
    assert (rep.peak_bytes, rep.peak_op) == (120, "c")
    assert (rep.state_bytes, rep.input_bytes, rep.allocated_bytes) == (40, 40, 160)
    assert blob_lifetimes(job) == {"a/0": (3, 5), "b/0": (4, 7), "c/0": (5, 6), "e/0": (6, 6)}


def test_seed_gradient_is_tagged():
    m = mlp()
    g = train_graph(m, flow.optim.SGD(m.parameters(), lr=0.1))
    g(*data())
    seeds = [o for o in g.forward_job.ops if o.tags.get("grad_root")]
    assert len(seeds) == 1 and seeds[0].tags["phase"] == "backward"
    assert seeds[0].outputs[0].shape == ()
