"""Generated optimizer updates (compiler/codegen/update.py): the generated loop against the
update ops' NumPy kernels on random params, grads and state (NaN and inf included, float32 and
float64, several steps with a changing learning rate), its NumPy fallbacks, and graphs trained
with SGD momentum and AdamW with generation on and off."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.codegen import update
from actorflow.compiler.plan import Plan
from actorflow.framework import dtype as dt
from actorflow.ops import registry

pytestmark = pytest.mark.timeout(300)

_DT = {np.dtype(np.float32): dt.float32, np.dtype(np.float64): dt.float64,
       np.dtype(np.int64): dt.int64}

CASES = [
    ("sgd_update", {}),
    ("sgd_update", {"weight_decay": 0.1}),
    ("momentum_update", {"momentum": 0.9}),
    ("momentum_update", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("momentum_update", {"momentum": 0.8, "dampening": 0.3, "maximize": True}),
    ("adam_update", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}),
    ("adam_update", {"beta1": 0.9, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.05,
                     "decoupled": True, "amsgrad": True}),
    ("adam_update", {"beta1": 0.8, "beta2": 0.9, "eps": 1e-8, "weight_decay": 0.02,
                     "maximize": True, "bias_correction": False}),
    ("rmsprop_update", {"alpha": 0.99, "eps": 1e-8}),
    ("rmsprop_update", {"alpha": 0.9, "eps": 1e-6, "centered": True, "momentum": 0.5,
                        "weight_decay": 0.01, "maximize": True}),
    ("rmsprop_update", {"alpha": 0.9, "eps": 1e-6, "momentum": 0.8}),
    ("adagrad_update", {"eps": 1e-10, "lr_decay": 0.01, "weight_decay": 0.1}),
    ("adadelta_update", {"rho": 0.9, "eps": 1e-6, "weight_decay": 0.01, "maximize": True}),
]
# a parameter over update.PARALLEL_MIN elements (chunks on the intra-op threads), an empty one
SHAPES = [(3, 5), (update.PARALLEL_MIN + 77,), (0,), (4, 1)]


def _inputs(op_name, attrs, dtype, shapes, seed=1):
    """Multi-tensor update inputs ``[lr, p0, g0, (step0), state0..., ...]`` with NaN and inf."""
    form = registry.get(op_name).c_update(attrs)
    rng = np.random.default_rng(seed)
    ins = [np.array(0.01)]
    for s in shapes:
        p, g = rng.standard_normal(s).astype(dtype), rng.standard_normal(s).astype(dtype)
        if p.size > 3:
            p.reshape(-1)[0], g.reshape(-1)[1], g.reshape(-1)[2] = np.nan, np.inf, -np.inf
        ins += [p, g] + ([np.array(0, np.int64)] if form.has_step else [])
        ins += [np.abs(rng.standard_normal(s)).astype(dtype) for _ in range(form.n_state)]
    return ins, 2 + form.n_state + form.has_step


def _metas(ins):
    return [(tuple(a.shape), _DT[a.dtype]) for a in ins]


def _same(a, b):
    return all(x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


DTYPES = [np.float32, np.float64]


def _multi_attrs(op_name, attrs, dtype):
    ins, arity = _inputs(op_name, attrs, dtype, SHAPES)
    return {"update": op_name, "update_attrs": attrs, "arity": arity}, _metas(ins)


@pytest.fixture(scope="module")
def case_kernels():
    """Every case's kernel, built as one library (one compiler run for the whole module)."""
    keys = [(i, d) for i in range(len(CASES)) for d in DTYPES]
    items = [("multi_tensor_update", *_multi_attrs(*CASES[i], d)) for i, d in keys]
    return dict(zip(keys, update.kernels_for(items)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(CASES)])
def test_generated_update_equals_numpy_kernel(case_kernels, case, dtype):
    op_name, attrs = CASES[case]
    ours, arity = _inputs(op_name, attrs, dtype, SHAPES)
    ref, _ = _inputs(op_name, attrs, dtype, SHAPES)
    mattrs = {"update": op_name, "update_attrs": attrs, "arity": arity}
    k = case_kernels[(case, dtype)]
    assert k is not None
    numpy_multi = registry.get("multi_tensor_update").kernel_cpu
    with np.errstate(all="ignore"):
        for lr in (0.01, 0.5, 0.003):  # lr changes per call; the kernel is the same
            ours[0][...] = ref[0][...] = lr
            k(ours, [], mattrs)
            numpy_multi(ref, [], mattrs)
    assert k.calls == 3
    # FMA contraction is off and each C operation is the NumPy kernel's on the same operands
    # (scalars rounded to the dtype first, as NumPy does): the same bits
    assert _same(ours, ref)


def test_every_update_op_with_a_c_form_is_checked_here():
    with_form = {n for n, op in registry.all_ops().items() if op.c_update is not None}
    assert with_form == {name for name, _ in CASES}


def test_single_update_op_task():
    attrs = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1,
             "decoupled": True}
    rng = np.random.default_rng(3)

    def make():
        r = np.random.default_rng(4)
        return [r.standard_normal((7, 9)).astype(np.float32),
                r.standard_normal((7, 9)).astype(np.float32), np.array(0.1),
                np.array(0, np.int64), np.zeros((7, 9), np.float32),
                np.zeros((7, 9), np.float32)]

    ours, ref = make(), make()
    k = update.kernel_for("adam_update", attrs, _metas(ours))
    for _ in range(4):
        g = rng.standard_normal((7, 9)).astype(np.float32)
        ours[1][...] = ref[1][...] = g
        k(ours, [], attrs)
        registry.get("adam_update").kernel_cpu(ref, [], attrs)
    assert k.calls == 4 and int(ours[3]) == 4 and _same(ours, ref)


def test_no_form_for_half_precision_or_ops_without_one():
    meta16 = [((4,), dt.float16), ((4,), dt.float16), ((), dt.float64)]
    assert update.task_of("sgd_update", {}, meta16) is None
    assert registry.get("lamb_update").c_update is None  # its trust ratio needs norms
    assert update.task_of("lamb_update", {}, meta16) is None


def _fallback_case(mutate):
    attrs = {"momentum": 0.9}
    ours, arity = _inputs("momentum_update", attrs, np.float32, [(6, 4), (5,)])
    ref, _ = _inputs("momentum_update", attrs, np.float32, [(6, 4), (5,)])
    mattrs = {"update": "momentum_update", "update_attrs": attrs, "arity": arity}
    k = update.kernel_for("multi_tensor_update", mattrs, _metas(ours))
    ours, ref = mutate(ours), mutate(ref)
    with np.errstate(all="ignore"):
        k(ours, [], mattrs)
        registry.get("multi_tensor_update").kernel_cpu(ref, [], mattrs)
    return k, ours, ref


def test_view_and_repeated_parameter_run_the_numpy_kernel():
    # a transposed parameter (not C-contiguous) and a parameter listed twice (its two updates
    # must happen one after the other): the call runs the NumPy kernel, same result
    def transposed(ins):
        base = ins[1].T.copy()
        ins[1] = base.T
        return ins

    k, ours, ref = _fallback_case(transposed)
    assert k.calls == 0 and _same(ours, ref)

    def repeated(ins):
        return ins + ins[1:4]

    k, ours, ref = _fallback_case(repeated)
    assert k.calls == 0 and _same(ours, ref)


def test_min_elements_keeps_small_updates_on_numpy(monkeypatch):
    monkeypatch.setenv(codegen.ENV, "1")
    monkeypatch.setenv(codegen.MIN_ENV, str(10 ** 9))
    g, _, _ = _train(lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9), steps=1)
    assert not any(isinstance(k, update.UpdateKernel)
                   for k in codegen.kernels_of(g.plan).values())


def test_skip_flag_leaves_params_alone():
    attrs = {"skip_if": True}
    flag = np.array([1.0])
    p = np.ones(5, np.float32)
    ins = [np.array(0.1), p, np.ones(5, np.float32), flag, np.ones(3, np.float32),
           np.ones(3, np.float32), flag]
    mattrs = {"update": "sgd_update", "update_attrs": attrs, "arity": 3}
    k = update.kernel_for("multi_tensor_update", mattrs, _metas(ins))
    k(ins, [], mattrs)
    assert np.all(p == 1) and np.all(ins[4] == 1)
    flag[...] = 0
    k(ins, [], mattrs)
    assert k.calls == 1 and np.allclose(p, 0.9) and np.allclose(ins[4], 0.9)


def _train(opt_fn, steps=4):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = opt_fn(model.parameters())
    sch = flow.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((32, 16)).astype(np.float32))
    y = flow.tensor(rng.standard_normal((32, 4)).astype(np.float32))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt, lr_sch=sch)

        def build(self, a, b):
            # mse_loss has no C form (cross_entropy's row kernel sums in another order)
            loss = F.mse_loss(self.model(a), b)
            loss.backward()
            return loss

    g = Train()
    losses = [float(g(x, y).numpy()) for _ in range(steps)]
    return g, losses, [p.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("opt_fn,op_name", [
    (lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3), "momentum_update"),
    (lambda ps: flow.optim.AdamW(ps, lr=0.01, weight_decay=0.1), "adam_update"),
])
def test_graph_trains_the_same_with_generated_updates(monkeypatch, opt_fn, op_name):
    monkeypatch.setenv(codegen.ENV, "1")
    g, on_losses, on_params = _train(opt_fn)
    gen = [e for e in g.plan.codegen["tasks"].values() if e["ops"] == [op_name]]
    assert g.plan.codegen["status"] == "built" and gen, g.plan.codegen
    kernels = [k for k in codegen.kernels_of(g.plan).values()
               if isinstance(k, update.UpdateKernel)]
    assert kernels and all(k.calls == 4 for k in kernels)
    back = Plan.from_json(g.plan.to_json())  # read back: builds its update kernels again
    assert any(isinstance(k, update.UpdateKernel) for k in codegen.kernels_of(back).values())
    monkeypatch.setenv(codegen.ENV, "0")
    _, off_losses, off_params = _train(opt_fn)
    # linear, relu, bias adds and mse_loss are exact in both forms and the update's C
    # operations are the NumPy kernel's (no FMA contraction): the same bits, with the lr
    # halving every step (passed per call, not compiled in)
    assert on_losses == off_losses
    for a, b in zip(on_params, off_params):
        np.testing.assert_array_equal(a, b)
