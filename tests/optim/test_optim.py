"""Optimizers: several steps vs torch.optim, one step vs hand-written NumPy, OneFlow-specific
semantics vs NumPy, state dicts, param groups, contiguous params and the update ops."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.registry import OpError
from tests import helpers

SHAPES = [(3, 4), (5,)]
STEPS = 6


def _data(seed=0, steps=STEPS, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return init, grads


def _run_flow(cls, kwargs, init, grads, groups=None):
    params = [flow.tensor(a.copy(), requires_grad=True) for a in init]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = cls(groups(params) if groups else params, **kwargs)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = flow.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params], opt


def _run_torch(cls, kwargs, init, grads, groups=None):
    torch = helpers.torch
    params = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    opt = cls(groups(params) if groups else params, **kwargs)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in params]


def _vs_torch(name, kwargs, torch_kwargs=None, groups=None, rtol=1e-5, atol=1e-6):
    torch = pytest.importorskip("torch")
    init, grads = _data()
    ours, _ = _run_flow(getattr(flow.optim, name), kwargs, init, grads, groups)
    ref = _run_torch(getattr(torch.optim, name), torch_kwargs or kwargs, init, grads, groups)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- vs torch.optim (option combinations where the semantics agree) ----------------------------

@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05),
    dict(lr=0.05, momentum=0.8, maximize=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True),
])
def test_sgd_vs_torch(kwargs):
    _vs_torch("SGD", kwargs)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("kwargs", [
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, eps=1e-6),
    dict(lr=0.01, amsgrad=True, weight_decay=0.05),
    dict(lr=0.01, maximize=True, weight_decay=0.05),
    dict(lr=0.01, amsgrad=True, maximize=True),
])
def test_adam_vs_torch(name, kwargs):
    # OneFlow's AdamW defaults to weight_decay=0 (PyTorch: 0.01), so always pass it
    _vs_torch(name, dict({"weight_decay": 0.0}, **kwargs))


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.01),
    dict(lr=0.01, alpha=0.9, weight_decay=0.1),
    dict(lr=0.01, centered=True),
    dict(lr=0.01, momentum=0.9),
    dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.05, maximize=True),
])
def test_rmsprop_vs_torch(kwargs):
    # OneFlow adds eps inside the square root, PyTorch outside: with a negligible eps they agree
    kwargs = dict(kwargs, eps=1e-30)
    _vs_torch("RMSprop", kwargs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1),
    dict(lr=0.1, lr_decay=0.5, weight_decay=0.1),
    dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3),
    dict(lr=0.1, maximize=True, weight_decay=0.1),
])
def test_adagrad_vs_torch(kwargs):
    _vs_torch("Adagrad", kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(lr=1.0),
    dict(lr=0.5, rho=0.6, eps=1e-4, weight_decay=0.1),
    dict(lr=1.0, maximize=True, weight_decay=0.1),
])
def test_adadelta_vs_torch(kwargs):
    _vs_torch("Adadelta", kwargs)


def test_param_groups_with_different_lr_vs_torch():
    def groups(ps):
        return [{"params": [ps[0]], "lr": 0.1}, {"params": [ps[1]], "lr": 0.01, "momentum": 0.5}]
    _vs_torch("SGD", dict(lr=0.05, momentum=0.9), groups=groups)
    _vs_torch("Adam", dict(lr=0.05), groups=groups)


# ---- one step vs NumPy --------------------------------------------------------------------------

def _one_step(cls, kwargs, p, g):
    ours, opt = _run_flow(cls, kwargs, [p], [[g]], None)
    return ours[0]


P = np.array([0.5, -1.0, 2.0, 0.25], dtype=np.float64)
G = np.array([0.1, 0.4, -0.3, 1.5], dtype=np.float64)


def test_one_step_sgd_numpy():
    np.testing.assert_allclose(_one_step(flow.optim.SGD, dict(lr=0.1, weight_decay=0.2), P, G),
                               P - 0.1 * (G + 0.2 * P))
    # momentum buffer starts at zero (OneFlow): the first step is damped
    out = _one_step(flow.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.5, nesterov=True),
                    P, G)
    buf = 0.5 * G
    np.testing.assert_allclose(out, P - 0.1 * (G + 0.9 * buf))


def test_one_step_adam_numpy():
    b1, b2, eps, lr, wd = 0.9, 0.99, 1e-8, 0.01, 0.1
    for cls, g in ((flow.optim.Adam, G + wd * P), (flow.optim.AdamW, G)):
        m, v = (1 - b1) * g, (1 - b2) * g * g
        want = P - lr / (1 - b1) * m / (np.sqrt(v) / np.sqrt(1 - b2) + eps)
        if cls is flow.optim.AdamW:
            want = want - lr * wd * P
        out = _one_step(cls, dict(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd), P, G)
        np.testing.assert_allclose(out, want, rtol=1e-12)
    out = _one_step(flow.optim.Adam, dict(lr=lr, betas=(b1, b2), do_bias_correction=False), P, G)
    np.testing.assert_allclose(out, P - lr * ((1 - b1) * G) / (np.sqrt((1 - b2) * G * G) + 1e-8))


def test_one_step_rmsprop_numpy():
    alpha, eps, lr = 0.9, 1e-2, 0.01
    sq = (1 - alpha) * G * G
    out = _one_step(flow.optim.RMSprop, dict(lr=lr, alpha=alpha, eps=eps), P, G)
    np.testing.assert_allclose(out, P - lr * G / np.sqrt(sq + eps))
    avg = (1 - alpha) * G
    out = _one_step(flow.optim.RMSprop, dict(lr=lr, alpha=alpha, eps=eps, centered=True,
                                             momentum=0.9), P, G)
    np.testing.assert_allclose(out, P - lr * G / np.sqrt(sq - avg * avg + eps))


def test_one_step_adagrad_adadelta_numpy():
    out = _one_step(flow.optim.Adagrad, dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3),
                    P, G)
    np.testing.assert_allclose(out, P - 0.1 * G / (np.sqrt(0.5 + G * G) + 1e-3))
    rho, eps = 0.9, 1e-6
    sq = (1 - rho) * G * G
    delta = np.sqrt(eps) / np.sqrt(sq + eps) * G
    out = _one_step(flow.optim.Adadelta, dict(lr=1.0, rho=rho, eps=eps), P, G)
    np.testing.assert_allclose(out, P - delta)


def _lamb_numpy(p, grads, lr, b1, b2, eps, wd, adam_w_mode, bias_correction):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        if not adam_w_mode:
            g = g + wd * p
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        bc1, bc2 = (1 - b1 ** t, 1 - b2 ** t) if bias_correction else (1.0, 1.0)
        u = (m / bc1) / (np.sqrt(v) / np.sqrt(bc2) + eps)
        wn, un = np.linalg.norm(p), np.linalg.norm(u)
        trust = wn / un if wn > 0 and un > 0 else 1.0
        p = p - lr * trust * (u + (wd * p if adam_w_mode else 0.0))
    return p


@pytest.mark.parametrize("adam_w_mode", [True, False])
@pytest.mark.parametrize("bias_correction", [True, False])
def test_lamb_vs_numpy(adam_w_mode, bias_correction):
    init, grads = _data(seed=3, shapes=[(4, 3)])
    kw = dict(lr=0.05, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
    ours, _ = _run_flow(flow.optim.LAMB, dict(kw, adam_w_mode=adam_w_mode,
                                             do_bias_correction=bias_correction), init, grads)
    want = _lamb_numpy(init[0].astype(np.float64), [g[0].astype(np.float64) for g in grads],
                       0.05, 0.9, 0.99, 1e-6, 0.1, adam_w_mode, bias_correction)
    np.testing.assert_allclose(ours[0], want, rtol=1e-4, atol=1e-5)


# ---- OneFlow-specific SGD semantics vs NumPy ----------------------------------------------------

def _sgd_numpy(p, grads, lr, momentum, dampening, nesterov, maximize, wd):
    buf = np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        if momentum == 0:
            p = p - lr * g
            continue
        buf = momentum * buf + (1 - dampening) * g
        d = g + momentum * buf if nesterov else buf
        p = p + lr * d if maximize else p - lr * d
    return p


@pytest.mark.parametrize("kwargs", [
    dict(momentum=0.9, dampening=0.5, nesterov=False, maximize=False, wd=0.0),
    dict(momentum=0.9, dampening=0.3, nesterov=True, maximize=True, wd=0.2),
    dict(momentum=0.0, dampening=0.0, nesterov=False, maximize=True, wd=0.1),
    dict(momentum=0.0, dampening=0.9, nesterov=True, maximize=False, wd=0.1),
])
def test_sgd_oneflow_semantics(kwargs):
    init, grads = _data(seed=4, shapes=[(6,)])
    wd = kwargs.pop("wd")
    params = [flow.tensor(init[0].copy(), requires_grad=True)]
    opt_kwargs = dict(lr=0.1, weight_decay=wd, **kwargs)
    if (kwargs["maximize"] or kwargs["nesterov"]) and not kwargs["momentum"]:
        # OneFlow ignores them, with a warning
        with pytest.warns(UserWarning, match="maximize|nesterov"):
            opt = flow.optim.SGD(params, **opt_kwargs)
    else:
        opt = flow.optim.SGD(params, **opt_kwargs)
    for gs in grads:
        params[0].grad = flow.tensor(gs[0])
        opt.step()
    want = _sgd_numpy(init[0].astype(np.float64), [g[0].astype(np.float64) for g in grads],
                      0.1, wd=wd, **kwargs)
    np.testing.assert_allclose(params[0].detach().numpy(), want, rtol=1e-5, atol=1e-6)


# ---- state dicts --------------------------------------------------------------------------------

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.3)),
    ("Adadelta", dict(lr=1.0, rho=0.8)),
    ("LAMB", dict(lr=0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS)
@pytest.mark.parametrize("contiguous", [False, True])
def test_state_dict_round_trip_continues_identically(name, kwargs, contiguous, tmp_path):
    init, grads = _data(seed=5, steps=6)
    cls = getattr(flow.optim, name)
    straight, _ = _run_flow(cls, dict(kwargs, contiguous_params=contiguous), init, grads)

    params = [flow.tensor(a.copy(), requires_grad=True) for a in init]
    opt = cls(params, **kwargs, contiguous_params=contiguous)
    for step, gs in enumerate(grads):
        for p, g in zip(params, gs):
            p.grad = flow.tensor(g)
        opt.step()
        if step == 2:
            sd = opt.state_dict()
            flow.save(sd, str(tmp_path / "opt.ckpt"))
            sd = flow.load(str(tmp_path / "opt.ckpt"))
            opt = cls(params, lr=123.0, contiguous_params=contiguous)  # options come from sd
            opt.load_state_dict(sd)
    for a, b in zip(straight, params):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_state_dict_layout_and_copy():
    init, grads = _data(steps=1)
    _, opt = _run_flow(flow.optim.Adam, dict(lr=0.01), init, grads,
                       groups=lambda ps: [{"params": [ps[1]]}, {"params": [ps[0]], "lr": 0.5}])
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.5
    assert set(sd["state"]) == {0, 1}
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][0]["step"].item() == 1
    # loading copies the state: the loaded optimizer does not write into the saved dict
    saved = sd["state"][0]["exp_avg"].numpy().copy()
    ps = [flow.tensor(a.copy(), requires_grad=True) for a in init]
    opt2 = flow.optim.Adam([{"params": [ps[1]]}, {"params": [ps[0]]}])
    opt2.load_state_dict(sd)
    ps[1].grad = flow.tensor(np.ones(SHAPES[1], np.float32))
    opt2.step()
    np.testing.assert_array_equal(sd["state"][0]["exp_avg"].numpy(), saved)


def test_load_state_dict_mismatch_errors():
    init, grads = _data(steps=1)
    _, opt = _run_flow(flow.optim.SGD, dict(lr=0.1, momentum=0.9), init, grads)
    sd = opt.state_dict()
    one = flow.optim.SGD([flow.tensor(init[0], requires_grad=True)])
    with pytest.raises(ValueError, match="group 0 holds 1 tensors.*holds 2"):
        one.load_state_dict(sd)
    two = flow.optim.SGD([{"params": [flow.tensor(init[0], requires_grad=True)]},
                          {"params": [flow.tensor(init[1], requires_grad=True)]}])
    with pytest.raises(ValueError, match="2 parameter groups"):
        one.load_state_dict(two.state_dict())
    swapped = flow.optim.SGD([flow.tensor(init[1], requires_grad=True),
                              flow.tensor(init[0], requires_grad=True)])
    with pytest.raises(ValueError, match="shape"):
        swapped.load_state_dict(sd)


# ---- groups, gradients, closure, contiguous -----------------------------------------------------

def test_param_group_validation():
    x = flow.tensor(np.ones(3, np.float32), requires_grad=True)
    # OneFlow: the parameters of a parameterless module (an empty iterator) make one empty
    # group; an empty list is an error (OneFlow fails on it with an IndexError)
    empty = flow.optim.SGD(flow.nn.ReLU().parameters())
    assert len(empty.param_groups) == 1 and empty.param_groups[0]["params"] == []
    empty.zero_grad()
    empty.step()
    with pytest.raises(ValueError, match="empty parameter list"):
        flow.optim.SGD([])
    with pytest.raises(TypeError, match="iterable"):
        flow.optim.SGD(x)
    with pytest.raises(ValueError, match="non-leaf"):
        flow.optim.SGD([x * 2])
    with pytest.raises(ValueError, match="learning rate"):
        flow.optim.Adam([x], lr=-1.0)
    with pytest.raises(ValueError, match="beta"):
        flow.optim.Adam([x], betas=(1.0, 0.9))
    with pytest.raises(RuntimeError, match="AMSGrad"):
        flow.optim.LAMB([x], amsgrad=True)
    opt = flow.optim.SGD([x], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": x})
    y = flow.tensor(np.ones(2, np.float32), requires_grad=True)
    opt.add_param_group({"params": y, "momentum": 0.5})
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["momentum"] == 0.5
    assert opt.param_groups[1]["params"] == [y]


def test_zero_grad_and_params_without_grad():
    x = flow.tensor(np.ones(3, np.float32), requires_grad=True)
    y = flow.tensor(np.ones(2, np.float32), requires_grad=True)
    opt = flow.optim.Adam([x, y], lr=0.1)
    (x * 3.0).sum().backward()
    opt.step()
    assert y not in opt.state and x in opt.state
    np.testing.assert_array_equal(y.detach().numpy(), np.ones(2))
    g = x.grad
    opt.zero_grad(set_to_none=False)
    assert x.grad is g
    np.testing.assert_array_equal(g.numpy(), np.zeros(3))
    x.sum().backward()  # the gradient of sum() is a read-only broadcast view
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3))
    opt.zero_grad()
    assert x.grad is None and y.grad is None


def test_step_with_closure_and_version_counter():
    x = flow.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    opt = flow.optim.SGD([x], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (x * x).sum()
        loss.backward()
        return loss

    with flow.no_grad():
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(x.detach().numpy(), [0.0, 0.0])
    # an update is an in-place write: a graph that saved the parameter can't be differentiated
    y = (x * x).sum()
    x.grad = flow.tensor(np.ones(2, np.float32))
    before = x._version
    opt.step()
    assert x._version == before + 1
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        y.backward()


def test_contiguous_params_share_one_buffer():
    init, grads = _data(seed=7)
    plain, _ = _run_flow(flow.optim.Adam, dict(lr=0.01), init, grads)
    params = [flow.tensor(a.copy(), requires_grad=True) for a in init]
    opt = flow.optim.Adam(params, lr=0.01, contiguous_params=True)
    (buf,) = opt._contiguous[0].tensors
    assert buf.shape == (sum(a.size for a in init),)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = flow.tensor(g)
        opt.step()
    for a, p in zip(plain, params):
        np.testing.assert_allclose(a, p.detach().numpy(), rtol=1e-6)
        assert np.shares_memory(p.detach().numpy(), buf.numpy())
    assert list(opt.state) == [buf]


def test_lr_scale_is_graph_only_and_fused_flag():
    # as OneFlow: an eager step ignores a group's lr_scale (nn.Graph applies it), and says so
    x = flow.tensor(np.ones(2, np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="fused"):
        opt = flow.optim.SGD([{"params": [x], "lr_scale": 0.5}], lr=0.2, fused=True)
    assert opt.param_groups[0]["fused"] is False
    x.grad = flow.tensor(np.ones(2, np.float32))
    with pytest.warns(UserWarning, match="lr_scale .*applied by nn.Graph only"):
        opt.step()
    np.testing.assert_allclose(x.detach().numpy(), [0.8, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()  # said once per optimizer
    np.testing.assert_allclose(x.detach().numpy(), [0.6, 0.6])


def test_optimizer_clip_grad_uses_group_keys():
    x = flow.tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = flow.optim.SGD([{"params": [x], "clip_grad_max_norm": 1.0,
                           "clip_grad_norm_type": 2.0}], lr=1.0)
    x.grad = flow.tensor(np.array([3.0, 4.0], np.float32))
    opt.clip_grad()
    np.testing.assert_allclose(x.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    opt.step()  # step() does not clip again
    np.testing.assert_allclose(x.detach().numpy(), [-0.6, -0.8], rtol=1e-5)
    with pytest.warns(UserWarning, match="clip_grad_max_norm"):
        flow.optim.SGD([x]).clip_grad()


# ---- the update ops -----------------------------------------------------------------------------

def test_update_op_checks_shapes():
    from actorflow.dispatch import apply
    from actorflow.ops import registry
    p = flow.tensor(np.ones((2, 3), np.float32))
    lr = flow.tensor(0.1, dtype=flow.float64)
    with pytest.raises(OpError, match="sgd_update.*gradient"):
        apply(registry.get("sgd_update"), [p, flow.tensor(np.ones(3, np.float32)), lr],
              {"weight_decay": 0.0})
    step = flow.tensor(0, dtype=flow.int64)
    m = flow.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(OpError, match="adam_update.*expected 7 inputs"):
        apply(registry.get("adam_update"), [p, p, lr, step, m, m],
              {"beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "amsgrad": True})
    with pytest.raises(OpError, match="step must be"):
        apply(registry.get("adagrad_update"), [p, p, lr, lr, m], {"eps": 1e-8})
    assert registry.get("adam_update").mutates == (0, 3, 4, 5, 6)


def test_update_op_has_no_outputs_and_writes_in_place():
    from actorflow.dispatch import apply
    from actorflow.ops import registry
    p = flow.tensor(np.ones(4, np.float32))
    arr = p.numpy()
    g = flow.tensor(np.full(4, 2.0, np.float32))
    buf = flow.tensor(np.zeros(4, np.float32))
    out = apply(registry.get("momentum_update"),
                [p, g, flow.tensor(0.5, dtype=flow.float64), buf],
                {"momentum": 0.9, "dampening": 0.0})
    assert out == []
    flow.synchronize()  # arr shares p's memory; the update lands when its instruction runs
    np.testing.assert_allclose(arr, np.zeros(4))
    np.testing.assert_allclose(buf.numpy(), np.full(4, 2.0))
