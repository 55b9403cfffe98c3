"""Loss functions: forward and gradients vs torch.nn.functional, finite differences, errors."""
from __future__ import annotations

import time

import numpy as np
import pytest

import actorflow as flow
from actorflow.ops.registry import OpError
from tests.helpers import gradcheck, to_torch, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
REDUCTIONS = ("none", "mean", "sum")
rng = np.random.default_rng(0)


def _torch_fn(name):
    return getattr(torch.nn.functional, name)


def compare(name, diff, fixed=(), kwargs=None, *, pos=None, atol=1e-10):
    """Run loss ``name`` in actorflow and torch on the same float64 values: ``diff`` are
    arrays that get gradients, ``fixed`` others (None stays None); compare loss and grads.
    ``pos`` orders the arguments: a list of ("d", i) / ("f", i) picks."""
    kwargs = dict(kwargs or {})
    pos = pos or [("d", i) for i in range(len(diff))] + [("f", i) for i in range(len(fixed))]
    fa = [flow.tensor(a, requires_grad=True) for a in diff]
    ta = [to_torch(a, requires_grad=True) for a in diff]
    ff = [None if a is None else flow.tensor(a) for a in fixed]
    tf = [None if a is None else to_torch(a) for a in fixed]
    fkw = {k: flow.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    tkw = {k: to_torch(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    out = getattr(flow, name)(*[fa[i] if k == "d" else ff[i] for k, i in pos], **fkw)
    ref = _torch_fn(name)(*[ta[i] if k == "d" else tf[i] for k, i in pos], **tkw)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9, atol=atol)
    proj = rng.standard_normal(tuple(ref.shape))
    (out * flow.tensor(proj)).sum().backward()
    (ref * to_torch(proj)).sum().backward()
    for f, t in zip(fa, ta):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=atol)


def _class_case(shape, ignore=False, seed=0):
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape) * 2
    n_cls = shape[1] if len(shape) > 1 else shape[0]
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    y = r.integers(0, n_cls, size=tshape)
    if ignore and y.ndim:
        y.flat[::3] = -100 if ignore is True else ignore
    return x, np.asarray(y, dtype=np.int64), n_cls


SHAPES = [(6, 5), (4, 3, 5), (3, 4, 2, 3), (5,)]


# ---- cross_entropy / nll_loss vs torch --------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_index_targets(shape, reduction, weighted, smoothing):
    x, y, n_cls = _class_case(shape, ignore=True)
    w = rng.uniform(0.2, 2.0, n_cls) if weighted else None
    compare("cross_entropy", [x], [y, w], {"reduction": reduction,
                                           "label_smoothing": smoothing})


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_custom_ignore_index(reduction):
    x, y, n_cls = _class_case((7, 4, 2), ignore=2)
    compare("cross_entropy", [x], [y], {"reduction": reduction, "ignore_index": 2,
                                        "label_smoothing": 0.1})


@needs_torch
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probability_targets(shape, reduction, weighted, smoothing):
    x = rng.standard_normal(shape)
    axis = 1 if len(shape) > 1 else 0
    t = np.exp(rng.standard_normal(shape))
    t /= t.sum(axis=axis, keepdims=True)
    w = rng.uniform(0.2, 2.0, shape[axis]) if weighted else None
    # the target gets gradients too
    compare("cross_entropy", [x, t], [w], {"reduction": reduction,
                                           "label_smoothing": smoothing})


@needs_torch
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(shape, reduction, weighted):
    x, y, n_cls = _class_case(shape, ignore=True, seed=1)
    w = rng.uniform(0.2, 2.0, n_cls) if weighted else None
    compare("nll_loss", [x], [y, w], {"reduction": reduction})


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_double_backward_matches_torch(reduction, weighted):
    """grad of nll_loss's gradient: nll_loss of ddx for dout (nll is linear), zeros for x."""
    x, y, n_cls = _class_case((5, 4), ignore=True, seed=3)
    w = rng.uniform(0.2, 2.0, n_cls) if weighted else None
    kw = {"reduction": reduction, "ignore_index": -100}
    fx = flow.tensor(x, requires_grad=True)
    fw = None if w is None else flow.tensor(w)
    out = flow.nn.functional.nll_loss(fx, flow.tensor(y), weight=fw, **kw)
    g = rng.random(tuple(out.shape))
    fg = flow.tensor(g, requires_grad=True)
    (dx,) = flow.autograd.grad(out, fx, fg, create_graph=True)
    v = rng.random(x.shape)
    ddx, ddg = flow.autograd.grad(dx, [fx, fg], flow.tensor(v))
    tx, tg = to_torch(x, requires_grad=True), to_torch(g, requires_grad=True)
    tout = torch.nn.functional.nll_loss(tx, to_torch(y), None if w is None else to_torch(w), **kw)
    (tdx,) = torch.autograd.grad(tout, tx, tg, create_graph=True)
    tdg = torch.autograd.grad(tdx, tg, to_torch(v))[0]
    np.testing.assert_allclose(ddg.numpy(), tdg.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ddx.numpy(), np.zeros(x.shape))


@needs_torch
def test_cross_entropy_legacy_reduction_args_and_float32():
    x, y, _ = _class_case((8, 6))
    out = flow.cross_entropy(flow.tensor(x.astype(np.float32)), flow.tensor(y),
                             size_average=False)
    ref = torch.nn.functional.cross_entropy(to_torch(x.astype(np.float32)), to_torch(y),
                                            reduction="sum")
    assert out.dtype == flow.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5)
    out = flow.nll_loss(flow.tensor(x), flow.tensor(y), reduce=False)
    assert tuple(out.shape) == (8,)


@needs_torch
def test_cross_entropy_extreme_logits_are_stable():
    x = np.array([[1000.0, -1000.0, 0.0], [-1e4, 1e4, 3.0]], dtype=np.float32)
    y = np.array([1, 0])
    compare("cross_entropy", [x.astype(np.float64)], [y], {"reduction": "none"}, atol=1e-6)
    xf = flow.tensor(x, requires_grad=True)
    loss = flow.cross_entropy(xf, flow.tensor(y))
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(xf.grad.numpy()).all()


def test_cross_entropy_half_precision_matches_float32():
    x, y, _ = _class_case((16, 7))
    l16 = flow.cross_entropy(flow.tensor(x.astype(np.float16)), flow.tensor(y))
    l32 = flow.cross_entropy(flow.tensor(x.astype(np.float16).astype(np.float32)),
                             flow.tensor(y))
    assert l16.dtype == flow.float16
    np.testing.assert_allclose(float(l16.item()), l32.item(), rtol=2e-3)


def test_cross_entropy_matches_numpy_log_softmax():
    x, y, _ = _class_case((5, 4, 3))
    logp = x - x.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    want = -np.take_along_axis(logp, y[:, None], 1)[:, 0]
    got = flow.cross_entropy(flow.tensor(x), flow.tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ---- pointwise losses vs torch ----------------------------------------------------------------

def _pair(shape=(3, 4), seed=2):
    r = np.random.default_rng(seed)
    return r.standard_normal(shape), r.standard_normal(shape)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
    ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}), ("huber_loss", {"delta": 0.4}),
])
def test_regression_losses(name, kw, reduction):
    x, t = _pair((2, 3, 4))
    compare(name, [x, t], (), dict(kw, reduction=reduction))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_regression_losses_weighted(name, reduction):
    x, t = _pair((3, 4))
    w = rng.uniform(0.1, 2.0, (3, 4))
    # weight is a keyword argument in torch: compare gradients for input, target and weight
    fx, ft, fw = (flow.tensor(a, requires_grad=True) for a in (x, t, w))
    tx, tt, tw = (to_torch(a, requires_grad=True) for a in (x, t, w))
    out = getattr(flow, name)(fx, ft, reduction=reduction, weight=fw)
    ref = _torch_fn(name)(tx, tt, reduction=reduction, weight=tw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    proj = rng.standard_normal(tuple(ref.shape))
    (out * flow.tensor(proj)).sum().backward()
    (ref * to_torch(proj)).sum().backward()
    for f, r in ((fx, tx), (ft, tt), (fw, tw)):
        np.testing.assert_allclose(f.grad.numpy(), r.grad.numpy(), rtol=1e-8, atol=1e-12)


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = np.log(rng.dirichlet(np.ones(5), size=4))
    t = rng.dirichlet(np.ones(5), size=4)
    if log_target:
        t = np.log(t)
    compare("kl_div", [x, t], (), {"reduction": reduction, "log_target": log_target})


@needs_torch
def test_kl_div_zero_target_contributes_zero():
    x = np.log(np.array([[0.2, 0.3, 0.5]]))
    t = np.array([[0.0, 0.4, 0.6]])
    out = flow.kl_div(flow.tensor(x), flow.tensor(t), reduction="sum")
    ref = torch.nn.functional.kl_div(to_torch(x), to_torch(t), reduction="sum")
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-12)


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_double_backward_matches_torch(reduction, log_target):
    """Second derivatives of kl_div (OneFlow's test_higher_derivative_loss): with the target
    requiring grad they match PyTorch; with only the input, its gradient does not depend on
    the input, and both refuse to differentiate it again without allow_unused."""
    x, t = rng.uniform(0.1, 1, (3, 4)), rng.uniform(0.1, 1, (3, 4))
    kw = {"reduction": reduction, "log_target": log_target}
    fx, ft = flow.tensor(x, requires_grad=True), flow.tensor(t, requires_grad=True)
    tx, tt = to_torch(x, requires_grad=True), to_torch(t, requires_grad=True)
    out, ref = flow.kl_div(fx, ft, **kw), torch.nn.functional.kl_div(tx, tt, **kw)
    g = rng.random(tuple(ref.shape))
    fg, tg = flow.tensor(g, requires_grad=True), to_torch(g, requires_grad=True)
    fd = flow.autograd.grad(out, [fx, ft], fg, create_graph=True)
    td = torch.autograd.grad(ref, [tx, tt], tg, create_graph=True)
    v = [rng.random(x.shape), rng.random(t.shape)]
    fdd = flow.autograd.grad(list(fd), [fx, ft, fg], [flow.tensor(a) for a in v])
    tdd = torch.autograd.grad(list(td), [tx, tt, tg], [to_torch(a) for a in v])
    for f, r in zip(fdd, tdd):
        np.testing.assert_allclose(f.numpy(), r.numpy(), rtol=1e-10, atol=1e-12)
    (fdx,) = flow.autograd.grad(flow.kl_div(fx, flow.tensor(t), **kw), fx, fg, create_graph=True)
    (tdx,) = torch.autograd.grad(torch.nn.functional.kl_div(tx, to_torch(t), **kw), tx, tg,
                                 create_graph=True)
    with pytest.raises(RuntimeError, match="not.*used"):
        torch.autograd.grad(tdx, [tx, tg], to_torch(v[0]))
    with pytest.raises(RuntimeError, match="not used"):
        flow.autograd.grad(fdx, [fx, fg], flow.tensor(v[0]))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight_shape", [None, (4,), (3, 4)])
def test_binary_cross_entropy(reduction, weight_shape):
    x = rng.uniform(0.02, 0.98, (3, 4))
    t = rng.uniform(0, 1, (3, 4))
    w = None if weight_shape is None else rng.uniform(0.5, 2, weight_shape)
    compare("binary_cross_entropy", [x, t], [w], {"reduction": reduction})


@needs_torch
def test_binary_cross_entropy_clamps_log():
    x = np.array([0.0, 1.0, 0.5, 1.0])
    t = np.array([1.0, 0.0, 1.0, 1.0])
    out = flow.binary_cross_entropy(flow.tensor(x), flow.tensor(t), reduction="none")
    ref = torch.nn.functional.binary_cross_entropy(to_torch(x), to_torch(t), reduction="none")
    np.testing.assert_allclose(out.numpy(), ref.numpy())
    assert out.numpy()[0] == 100.0


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos_weighted", [False, True])
def test_binary_cross_entropy_with_logits(reduction, weighted, pos_weighted):
    x = rng.standard_normal((3, 4)) * 4
    t = rng.uniform(0, 1, (3, 4))
    kw = {"reduction": reduction}
    if weighted:
        kw["weight"] = rng.uniform(0.5, 2, (3, 1))
    if pos_weighted:
        kw["pos_weight"] = rng.uniform(0.5, 3, (4,))
    compare("binary_cross_entropy_with_logits", [x, t], (), kw)


def test_binary_cross_entropy_with_logits_is_stable():
    x = flow.tensor(np.array([800.0, -800.0, 30.0]), requires_grad=True)
    t = flow.tensor(np.array([0.0, 1.0, 1.0]))
    loss = flow.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [800.0, 800.0, np.log1p(np.exp(-30.0))])
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, -1.0, -1 / (1 + np.exp(30.0))])


# ---- finite differences (float64) -------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (3, 4, 2), (4,)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_cross_entropy_and_nll(shape, reduction):
    x, y, n_cls = _class_case(shape, ignore=True, seed=3)
    w = rng.uniform(0.5, 2, n_cls)
    yt, wt = flow.tensor(y), flow.tensor(w)
    gradcheck(lambda a: flow.cross_entropy(a, yt, weight=wt, reduction=reduction,
                                           label_smoothing=0.2), x)
    gradcheck(lambda a: flow.nll_loss(a, yt, weight=wt, reduction=reduction), x)
    axis = 1 if len(shape) > 1 else 0
    t = rng.uniform(0.1, 1, shape)
    t /= t.sum(axis=axis, keepdims=True)
    gradcheck(lambda a, b: flow.cross_entropy(a, b, weight=wt, reduction=reduction,
                                              label_smoothing=0.1), x, t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.7}), ("huber_loss", {}),
])
def test_gradcheck_regression_losses(name, kw, reduction):
    x, t = _pair((3, 4), seed=4)
    w = rng.uniform(0.5, 2, (3, 4))
    fn = getattr(flow, name)
    gradcheck(lambda a, b: fn(a, b, reduction=reduction, **kw), x, t)
    if name != "smooth_l1_loss":
        gradcheck(lambda a, b, c: fn(a, b, reduction=reduction, weight=c, **kw), x, t, w)


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_gradcheck_kl_div(reduction, log_target):
    x = np.log(rng.uniform(0.1, 1, (3, 4)))
    t = rng.uniform(0.1, 1, (3, 4))
    if log_target:
        t = np.log(t)
    gradcheck(lambda a, b: flow.kl_div(a, b, reduction=reduction, log_target=log_target), x, t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_binary_cross_entropy(reduction):
    x = rng.uniform(0.1, 0.9, (3, 4))
    t = rng.uniform(0, 1, (3, 4))
    w = rng.uniform(0.5, 2, (4,))
    gradcheck(lambda a, b, c: flow.binary_cross_entropy(a, b, weight=c, reduction=reduction),
              x, t, w)
    pw = rng.uniform(0.5, 3, (4,))
    gradcheck(lambda a, b, c, d: flow.binary_cross_entropy_with_logits(
        a, b, weight=c, pos_weight=d, reduction=reduction), x * 6 - 3, t, w[:, None][:3], pw)


# ---- errors -----------------------------------------------------------------------------------

def _t(*shape, dtype=np.float64):
    return flow.tensor(rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                  "kl_div", "binary_cross_entropy",
                                  "binary_cross_entropy_with_logits"])
def test_pointwise_errors(name):
    fn = getattr(flow, name)
    with pytest.raises(OpError, match=rf"{name}: target shape \(3, 5\) must match input "
                                      rf"shape \(3, 4\)"):
        fn(_t(3, 4), _t(3, 5))
    with pytest.raises(OpError, match=rf"{name}: reduction must be one of .*'avg'"):
        fn(_t(3, 4), _t(3, 4), reduction="avg")
    with pytest.raises(TypeError, match=rf"{name}: target must be a Tensor"):
        fn(_t(3, 4), [1.0, 2.0])


def test_class_loss_errors():
    x = _t(4, 3)
    with pytest.raises(OpError, match=r"cross_entropy: expected a target of shape \(4,\).*"
                                      r"\(4, 3\)"):
        flow.cross_entropy(x, flow.tensor(np.zeros((4, 3), dtype=np.int64)))
    with pytest.raises(OpError, match="cross_entropy: a class-probability target must have"):
        flow.cross_entropy(x, _t(4))
    with pytest.raises(OpError, match="nll_loss: target must hold integer class indices"):
        flow.nll_loss(x, _t(4, 3))
    with pytest.raises(OpError, match=r"cross_entropy: weight must be .* shape \(3,\)"):
        flow.cross_entropy(x, flow.tensor(np.zeros(4, dtype=np.int64)), weight=_t(4))
    with pytest.raises(OpError, match="cross_entropy: reduction must be one of"):
        flow.cross_entropy(x, flow.tensor(np.zeros(4, dtype=np.int64)), reduction="batchmean")
    with pytest.raises(OpError, match="ignore_index is not supported"):
        flow.cross_entropy(x, _t(4, 3), ignore_index=0)
    with pytest.raises(OpError, match="label_smoothing must be in"):
        flow.cross_entropy(x, flow.tensor(np.zeros(4, dtype=np.int64)), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="cross_entropy.*target 7 is out of bounds for 3"):
        flow.cross_entropy(x, flow.tensor(np.array([0, 1, 7, 2]))).numpy()  # at the sync
    with pytest.raises(RuntimeError, match="nll_loss.*target -1 is out of bounds"):
        flow.nll_loss(x, flow.tensor(np.array([0, 1, -1, 2]))).numpy()
    with pytest.raises(OpError, match="cross_entropy: expected a floating point input"):
        flow.cross_entropy(flow.tensor(np.ones((4, 3), dtype=np.int64)),
                           flow.tensor(np.zeros(4, dtype=np.int64)))


def test_other_errors():
    with pytest.raises(RuntimeError, match="binary_cross_entropy.*between 0 and 1"):
        flow.binary_cross_entropy(flow.tensor([0.5, 1.5]), flow.tensor([1.0, 0.0])).numpy()
    with pytest.raises(OpError, match="weight of shape \\(5,\\) must broadcast"):
        flow.binary_cross_entropy_with_logits(_t(3, 4), _t(3, 4), weight=_t(5))
    with pytest.raises(OpError, match="smooth_l1_loss: beta must be non-negative"):
        flow.smooth_l1_loss(_t(3), _t(3), beta=-1.0)
    with pytest.raises(OpError, match="huber_loss: delta must be positive"):
        flow.huber_loss(_t(3), _t(3), delta=0.0)
    with pytest.raises(OpError, match="mse_loss: reduction must be one of.*'batchmean'"):
        flow.mse_loss(_t(3), _t(3), reduction="batchmean")


def test_weight_gradient_and_double_backward_are_refused():
    x = flow.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    y = flow.tensor(np.array([0, 1, 2, 0]))
    w = flow.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(RuntimeError, match="cross_entropy: the gradient with respect to weight"):
        flow.cross_entropy(x, y, weight=w).backward()
    p = flow.tensor(rng.uniform(0.1, 0.9, (4, 3)), requires_grad=True)
    loss = flow.binary_cross_entropy(p, flow.tensor(np.zeros((4, 3))))
    (g,) = flow.autograd.grad(loss, [p], create_graph=True)
    with pytest.raises(RuntimeError, match="binary_cross_entropy: .*double backward"):
        g.sum().backward()


def test_all_ignored_mean_is_nan_like_torch():
    x = _t(3, 4)
    out = flow.cross_entropy(x, flow.tensor(np.full(3, -100)))
    assert np.isnan(out.item())


# ---- timing (printed, not asserted) -----------------------------------------------------------

@needs_torch
def test_cross_entropy_timing_report(capsys):
    x = rng.standard_normal((4096, 65)).astype(np.float32)
    y = rng.integers(0, 65, 4096)

    def run_flow():
        a = flow.tensor(x, requires_grad=True)
        flow.cross_entropy(a, flow.tensor(y)).backward()

    def run_torch():
        a = to_torch(x, requires_grad=True)
        torch.nn.functional.cross_entropy(a, to_torch(y)).backward()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # NumPy kernels use one core: compare like with like
    times = {}
    try:
        for label, fn in (("actorflow", run_flow), ("torch", run_torch)):
            fn()
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(10):
                    fn()
                best = min(best, (time.perf_counter() - start) / 10 * 1e3)
            times[label] = best
    finally:
        torch.set_num_threads(threads)
    with capsys.disabled():
        print(f"\ncross_entropy fwd+bwd (4096, 65) float32: actorflow {times['actorflow']:.2f} "
              f"ms, torch (1 thread) {times['torch']:.2f} ms")
