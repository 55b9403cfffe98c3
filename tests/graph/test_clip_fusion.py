"""Gradient clipping in an nn.Graph (param groups with clip_grad_max_norm): the fuse_clip_grad
pass folds clip_grad_by_norm into the multi_tensor_update, grad_norm runs as a generated
reduction. The graph trains to eager's losses (clip_grad_norm_ then step) with generated kernels
off (bit for bit) and on (within float32 rounding: GEN_RTOL / GEN_ATOL); the Job and the Plan
show the fused ops; the clip stays where its clipped gradient is observed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.job.job import OpConf
from actorflow.passes.fuse_clip_grad import fuse_clip_grad
from tests.helpers import GEN_ATOL, GEN_RTOL

pytestmark = pytest.mark.timeout(300)

STEPS = 5


def _model():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 48), nn.Tanh(), nn.Linear(48, 48), nn.ReLU(),
                         nn.Linear(48, 4))


def _optimizer(model, kind: str, max_norm: float, norm_type: float, split: bool = False):
    params = list(model.parameters())
    clip = {"clip_grad_max_norm": max_norm, "clip_grad_norm_type": norm_type}
    groups = ([{"params": params[:1], **clip}, {"params": params[1:], **clip}] if split
              else [{"params": params, **clip}])
    if kind == "sgd":
        return flow.optim.SGD(groups, lr=0.1, momentum=0.9)
    return flow.optim.AdamW(groups, lr=1e-2, weight_decay=0.01)


def _data(nan_step: int | None = None):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((16, 8)).astype(np.float32) * 3 for _ in range(STEPS)]
    if nan_step is not None:
        xs[nan_step][0, 0] = np.nan
    y = rng.standard_normal((16, 4)).astype(np.float32)
    return [flow.tensor(x) for x in xs], flow.tensor(y)


def _loss(model, x, y):
    return ((model(x) - y) ** 2).mean()


def train_eager(kind, max_norm, norm_type, nan_step=None, split=False):
    model = _model()
    opt = _optimizer(model, kind, max_norm, norm_type, split)
    xs, y = _data(nan_step)
    losses, norms = [], []
    for x in xs:
        opt.zero_grad()
        loss = _loss(model, x, y)
        loss.backward()
        norms.append(flow.nn.utils.clip_grad_norm_(model.parameters(), math.inf).item())
        opt.clip_grad()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), _params(model), norms


def _params(model) -> list:
    return [p.numpy().copy() for p in model.parameters()]


def make_graph(model, opt, y, returns_grad: bool = False, disable=()):
    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = model
            self.add_optimizer(opt)
            for name in disable:
                self.config.disable_pass(name)

        def build(self, x):
            loss = _loss(self.m, x, y)
            loss.backward()
            if returns_grad:
                return loss, self.m[0].bias.grad
            return loss

    return G()


def train_graph(kind, max_norm, norm_type, nan_step=None, split=False, **kw):
    model = _model()
    opt = _optimizer(model, kind, max_norm, norm_type, split)
    xs, y = _data(nan_step)
    g = make_graph(model, opt, y, **kw)
    losses = [g(x) for x in xs]
    if kw.get("returns_grad"):
        grads = [out[1].numpy().copy() for out in losses]
        losses = [out[0] for out in losses]
        return np.array([v.item() for v in losses]), _params(model), g, grads
    return np.array([v.item() for v in losses]), _params(model), g


def _codegen(monkeypatch, on: bool) -> None:
    monkeypatch.setenv("ACTORFLOW_GRAPH_CODEGEN", "1" if on else "0")


def _assert_same(got, want, exact: bool, msg: str = "") -> None:
    for a, b in zip(got, want):
        if exact:
            assert np.array_equal(a, b, equal_nan=True), msg
        else:
            np.testing.assert_allclose(a, b, rtol=GEN_RTOL, atol=GEN_ATOL, err_msg=msg)


CASES = [("sgd", 0.05, 2.0), ("sgd", 0.02, math.inf), ("sgd", 0.3, 1.0),
         ("adamw", 0.05, 2.0)]


@pytest.mark.parametrize("codegen_on", [False, True], ids=["numpy", "codegen"])
@pytest.mark.parametrize("kind,max_norm,norm_type", CASES)
def test_clipped_graph_trains_like_eager(monkeypatch, codegen_on, kind, max_norm, norm_type):
    want_losses, want_params, norms = train_eager(kind, max_norm, norm_type)
    assert max(norms) > max_norm  # the clip changes the steps (a coefficient below 1)
    _codegen(monkeypatch, codegen_on)
    losses, params, g = train_graph(kind, max_norm, norm_type)
    # AdamW's step is about lr whatever the gradient's size, so float32 noise in a near-zero
    # gradient is a step of noise (tests/helpers.numpy_kernels_under_adamw): only its losses
    # and the NumPy run are compared tightly
    exact = not codegen_on
    _assert_same(losses, want_losses, exact, "losses")
    if kind == "sgd" or exact:
        _assert_same(params, want_params, exact, "parameters")
    kinds = [o.op_type for o in g.full_job.ops]
    assert "clip_grad_by_norm" not in kinds and "grad_norm" in kinds
    report = g.plan.codegen.get("tasks", {})
    if codegen_on:
        (norm_task,) = [v for v in report.values() if v["ops"] == ["grad_norm"]]
        assert norm_task.get("reduce") and norm_task["symbol"].startswith("af_r")
        update_op = "momentum_update" if kind == "sgd" else "adam_update"
        assert [v["ops"] for v in report.values() if "clip_grad_by_norm" in v["ops"]] == \
            [["clip_grad_by_norm", update_op]]
    else:
        assert report == {}


def test_job_and_plan_show_the_fused_update(monkeypatch):
    _codegen(monkeypatch, True)
    _, _, g = train_graph("sgd", 0.05, 2.0)
    job = g.full_job
    (norm,) = job.ops_of_type("grad_norm")
    (mtu,) = job.ops_of_type("multi_tensor_update")
    n_params = len(list(g.m.parameters()))
    assert mtu.attrs["grad_scale"] == "clip_grad_by_norm"
    assert mtu.attrs["grad_scale_attrs"] == {"max_norm": 0.05}
    assert mtu.attrs["grad_scale_params"] == list(range(n_params))
    assert mtu.inputs[-1] == norm.out(0)  # the total norm, read by the update
    assert sorted(norm.inputs) == sorted(mtu.inputs[2:-1:3])  # the norm of the update's grads
    tasks = {t.op_name: t for t in g.plan.tasks}
    assert tasks[mtu.name].generated.startswith("af_u")
    assert tasks[norm.name].generated.startswith("af_r")
    assert g.plan.codegen["tasks"][mtu.name]["ops"] == ["clip_grad_by_norm", "momentum_update"]
    # both generated kernels ran every step (no NumPy fallback)
    kernels = g.plan.generated_kernels
    assert kernels[tasks[mtu.name].task_id].calls == STEPS
    assert kernels[tasks[norm.name].task_id].calls == STEPS
    # the Job and the Plan are data: the fused op survives JSON
    assert type(job).from_json(job.to_json()) == job
    assert f"C {tasks[mtu.name].generated}: clip_grad_by_norm momentum_update" in g.plan.to_dot()


@pytest.mark.parametrize("disable", [("fuse_clip_grad",), ("fuse_model_update",)])
def test_switching_the_fold_off_keeps_the_clip_ops(monkeypatch, disable):
    _codegen(monkeypatch, False)
    want_losses, want_params, _ = train_eager("sgd", 0.05, 2.0)
    losses, params, g = train_graph("sgd", 0.05, 2.0, disable=disable)
    kinds = [o.op_type for o in g.full_job.ops]
    assert kinds.count("clip_grad_by_norm") == len(params)
    assert all("grad_scale" not in o.attrs for o in g.full_job.ops_of_type("multi_tensor_update"))
    _assert_same(losses, want_losses, True)
    _assert_same(params, want_params, True)


@pytest.mark.parametrize("codegen_on", [False, True], ids=["numpy", "codegen"])
def test_one_parameter_group_and_two_groups(monkeypatch, codegen_on):
    # a group of one parameter: its lone update op becomes a one-member multi_tensor_update
    want_losses, want_params, _ = train_eager("sgd", 0.05, 2.0, split=True)
    _codegen(monkeypatch, codegen_on)
    losses, params, g = train_graph("sgd", 0.05, 2.0, split=True)
    _assert_same(losses, want_losses, not codegen_on)
    _assert_same(params, want_params, not codegen_on)
    job = g.full_job
    assert not job.ops_of_type("clip_grad_by_norm") and len(job.ops_of_type("grad_norm")) == 2
    sizes = sorted(len(o.attrs["grad_scale_params"])
                   for o in job.ops_of_type("multi_tensor_update"))
    assert sizes == [1, len(params) - 1]


@pytest.mark.parametrize("codegen_on", [False, True], ids=["numpy", "codegen"])
def test_a_nan_gradient_gives_nan_parameters_as_eager(monkeypatch, codegen_on):
    want_losses, want_params, _ = train_eager("sgd", 0.05, 2.0, nan_step=2)
    _codegen(monkeypatch, codegen_on)
    losses, params, _ = train_graph("sgd", 0.05, 2.0, nan_step=2)
    assert np.isnan(losses[3:]).all() and all(np.isnan(p).all() for p in params)
    _assert_same(losses[:3], want_losses[:3], not codegen_on)
    _assert_same(params, want_params, True)  # all NaN


@pytest.mark.parametrize("codegen_on", [False, True], ids=["numpy", "codegen"])
def test_a_returned_gradient_is_the_unclipped_one(monkeypatch, codegen_on):
    # build() returns a gradient: the output reads it before the clip, so it is the unclipped
    # gradient with or without the fold (the update still runs after the output's read)
    _codegen(monkeypatch, codegen_on)
    model = _model()
    xs, y = _data()
    loss = _loss(model, xs[0], y)
    loss.backward()
    want = model[0].bias.grad.numpy().copy()
    losses, params, g, grads = train_graph("sgd", 0.05, 2.0, returns_grad=True)
    np.testing.assert_allclose(grads[0], want, rtol=GEN_RTOL, atol=GEN_ATOL)
    want_losses, want_params, _ = train_eager("sgd", 0.05, 2.0)
    _assert_same(losses, want_losses, not codegen_on)
    _assert_same(params, want_params, not codegen_on)
    assert not g.full_job.ops_of_type("clip_grad_by_norm")


def test_a_gradient_read_after_its_clip_keeps_the_clip(monkeypatch):
    # an op reading the clipped gradient (between the clip and the update) observes it: that
    # gradient's clip stays, the others fold into the update
    _codegen(monkeypatch, False)
    model = _model()
    opt = _optimizer(model, "sgd", 0.05, 2.0)
    xs, y = _data()
    g = make_graph(model, opt, y, disable=("fuse_clip_grad",))
    g(xs[0])
    job = g.full_job.copy()
    clips = job.ops_of_type("clip_grad_by_norm")
    observed = clips[1]
    at = job.ops.index(observed)
    reader = OpConf("observer", "scalar_mul", [observed.inputs[0]], {"scalar": 2.0},
                    [], "", [observed.name], {"phase": "optimizer"})
    reader.outputs = [job.op_map()[observed.inputs[0].split("/")[0]].outputs[0]]
    job.ops.insert(at + 1, reader)
    job.verify()
    out = fuse_clip_grad(job)
    out.verify()
    kept = out.ops_of_type("clip_grad_by_norm")
    assert [c.name for c in kept] == [observed.name]
    (mtu,) = out.ops_of_type("multi_tensor_update")
    assert mtu.attrs["grad_scale_params"] == [m for m in range(len(clips)) if m != 1]
    pos = {o.name: i for i, o in enumerate(out.ops)}
    assert pos["observer"] < pos[mtu.name] and pos[observed.name] < pos["observer"]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the inf input makes NaNs on purpose
@pytest.mark.parametrize("acc", [1, 2])
@pytest.mark.parametrize("codegen_on", [False, True], ids=["numpy", "codegen"])
def test_grad_scaler_and_accumulation_with_the_fold_on_and_off(monkeypatch, codegen_on, acc):
    # float16 AMP's GradScaler unscales the gradients before the clip and skips a non-finite
    # step's updates (their skip flag, which the clipping update passes on): with the fold on
    # and off the same bits, the inf step skipped in both
    from tests.passes.test_training import data, mlp, train_graph as scaler_graph

    _codegen(monkeypatch, codegen_on)
    x, y = data()
    bad = x.numpy().copy()
    bad[0, 0] = np.inf
    batches = [x, x * 0.5, flow.tensor(bad), x * 2.0]
    runs = []
    for disable in ((), ("fuse_clip_grad",)):
        m = mlp()
        opt = flow.optim.SGD([{"params": list(m.parameters()), "clip_grad_max_norm": 0.05,
                               "clip_grad_norm_type": 2.0}], lr=0.1, momentum=0.9)
        g = scaler_graph(m, opt, amp=flow.float16, acc=acc, disable=disable)
        losses = [g(b, y).numpy().copy() for b in batches]
        kinds = [o.op_type for o in g.full_job.ops]
        assert ("clip_grad_by_norm" in kinds) == bool(disable)
        runs.append((losses, [p.numpy().copy() for p in m.parameters()],
                     g._grad_scaler.state_dict()))
    (l1, p1, s1), (l2, p2, s2) = runs
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(l1, l2))
    assert all(np.array_equal(a, b) for a, b in zip(p1, p2))
    assert s1 == s2 and s1["scale"] == 2.0 ** 15  # the inf step was skipped, in both
