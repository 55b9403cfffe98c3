"""Eager autograd through in-place writes into views: the base's history is rebased
(``actorflow/dispatch/copy_slices.py``). Gradients of the base's inputs and of the written-in
tensors are compared with PyTorch (float64) and with finite differences."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import actorflow as flow

# view kinds of a (4, 6) tensor: the same code runs on actorflow and torch tensors
VIEWS = {
    "column": lambda y: y[:, 0],
    "rows": lambda y: y[1:],
    "step": lambda y: y[:, ::2],
    "int": lambda y: y[2],
    "select": lambda y: y.select(1, 2),
    "narrow": lambda y: y.narrow(1, 1, 3),
    "split": lambda y: y.split(2, dim=1)[1],
    "chunk": lambda y: y.chunk(2, 0)[1],
    "view": lambda y: y.view(6, 4),
    "view_flat": lambda y: y.view(-1),
    "reshape": lambda y: y.reshape(3, 8),
    "transpose": lambda y: y.transpose(0, 1),
    "t": lambda y: y.t(),
    "permute": lambda y: y.permute(1, 0),
    "unsqueeze": lambda y: y.unsqueeze(1),
    "squeeze": lambda y: y[2:3].squeeze(0),
    "diagonal": lambda y: y.diagonal(),
    "diagonal_offset": lambda y: y.diagonal(1),
    "chain": lambda y: y.transpose(0, 1)[1:5].narrow(1, 1, 2).select(1, 0),
}
# torch refuses in-place writes into the pieces of split / chunk under autograd: the same
# elements as a narrow (actorflow allows the write and rebases as for narrow)
TORCH_VIEWS = dict(VIEWS, split=lambda y: y.narrow(1, 2, 2), chunk=lambda y: y.narrow(0, 2, 2))


def _setitem(v, z):
    v[0] = z[0] * 2


WRITES = {
    "mul_": lambda v, z: v.mul_(2),
    "mul_tensor": lambda v, z: v.mul_(z),
    "add_tensor": lambda v, z: v.add_(z),
    "iadd": lambda v, z: v.__iadd__(z),
    "copy_": lambda v, z: v.copy_(z * 3),
    "relu_": lambda v, z: v.relu_(),
    "fill_": lambda v, z: v.fill_(0.5),
    "zero_": lambda v, z: v.zero_(),
    "clamp_": lambda v, z: v.clamp_(-0.5, 0.5),
    "setitem": _setitem,
}


def _loss(lib, view, write, x, w, c):
    """y from x; a view of y written in place with z (a view of w); a loss reading y, the
    written view and another view taken before the write."""
    views = TORCH_VIEWS if lib is torch else VIEWS
    y = x * 1.5
    other = y[1]
    v = views[view](y)
    z = views[view](w)
    WRITES[write](v, z)
    return (y * c).sum() + (v * v).sum() + (other * other).sum()


def _grads(lib, view, write, xs, ws, cs):
    x = lib.tensor(xs, requires_grad=True)
    w = lib.tensor(ws, requires_grad=True)
    loss = _loss(lib, view, write, x, w, lib.tensor(cs))
    loss.backward()
    zeros = np.zeros_like(xs)
    return [float(loss.detach().numpy()), x.grad.numpy(),
            zeros if w.grad is None else w.grad.numpy()]


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((4, 6)) for _ in range(3)]


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("view", list(VIEWS))
def test_write_into_view_gradients_match_torch(view, write):
    xs, ws, cs = _data()
    got = _grads(flow, view, write, xs, ws, cs)
    ref = _grads(torch, view, write, xs, ws, cs)
    for what, a, b in zip(("loss", "x.grad", "w.grad"), got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("view,write", [("column", "mul_tensor"), ("chain", "copy_"),
                                        ("diagonal", "add_tensor"), ("t", "clamp_"),
                                        ("step", "setitem")])
def test_write_into_view_gradients_match_finite_differences(view, write):
    xs, ws, cs = _data(1)
    got = _grads(flow, view, write, xs, ws, cs)

    def f(x, w):
        with flow.no_grad():
            return float(_loss(flow, view, write, flow.tensor(x), flow.tensor(w),
                               flow.tensor(cs)).numpy())

    eps = 1e-6
    for k, (arr, g) in enumerate(((xs, got[1]), (ws, got[2]))):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            d = np.zeros_like(arr)
            d[i] = eps
            args = [xs, ws]
            hi = f(*[a + d if j == k else a for j, a in enumerate(args)])
            lo = f(*[a - d if j == k else a for j, a in enumerate(args)])
            num[i] = (hi - lo) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6)


def _both(fn, *arrays):
    """``fn(lib, *leaves)`` -> loss, on both libraries: (loss, grads) pairs."""
    out = []
    for lib in (flow, torch):
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        loss = fn(lib, *leaves)
        loss.backward()
        out.append([float(loss.detach().numpy())] + [
            np.zeros_like(a) if t.grad is None else t.grad.numpy()
            for t, a in zip(leaves, arrays)])
    return out


def _check(fn, *arrays):
    got, ref = _both(fn, *arrays)
    for i, (a, b) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=f"result {i}")


def _two_views(lib, x, w):
    y = x * 2
    a, b = y[:, 0], y[1]          # overlap at (1, 0)
    a.mul_(w[:, 0])
    b.add_(w[2] * a[1].clone())   # reads the written a
    return (y * y).sum() + (a * 3).sum() + b.sum()


def _chain_then_parent(lib, x, w):
    y = x + 0
    p = y[1:]
    q = p.t()[2]                  # a view of a view
    q.copy_(w[0, :3])
    p.mul_(w[1:])
    return (y ** 2).sum() + (q * w[3, :3]).sum()


def _base_then_old_view(lib, x, w):
    y = x * 1
    u = y[0]                      # taken before the base is written directly
    y.mul_(w)
    return (u * u).sum() + y.sum()


def _used_before_and_after(lib, x, w):
    y = x * 3
    v = y[:, 1]
    before = (v * 2).sum() + (y + 1).sum()   # these save nothing the write changes
    v.add_(w[:, 1])
    return before + (y * w).sum() + (v * 2).sum()


def _leaf_base_without_grad(lib, x, w):
    buf = lib.zeros(4, 6, dtype=lib.float64)
    buf[1].copy_(w[1])
    buf.t()[2].add_(x[:, 2])
    return (buf * buf).sum()


def _overwrite_with_constant(lib, x, w):
    y = x * 2
    y.copy_(lib.ones(4, 6, dtype=lib.float64))
    y[0].mul_(w[0])
    return (y * 3).sum()


def _views_of_a_flat_view(lib, x, w):
    y = x * 1.5
    v = y.view(24)
    v.narrow(0, 3, 5).mul_(w.view(24)[:5])
    v[20:].relu_()
    return (y * x).sum()


@pytest.mark.parametrize("fn", [_two_views, _chain_then_parent, _base_then_old_view,
                                _used_before_and_after, _leaf_base_without_grad,
                                _overwrite_with_constant, _views_of_a_flat_view])
def test_histories_of_bases_and_views_match_torch(fn):
    xs, ws, _ = _data(2)
    _check(fn, xs, ws)


def test_rule_that_saved_the_base_raises_version_error_as_torch():
    xs, _, _ = _data(3)
    for lib in (flow, torch):
        x = lib.tensor(xs, requires_grad=True)
        y = x * 1
        q = y * y                 # mul saves y
        y[:, 0].mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace|in-place operation"):
            q.sum().backward()


def test_no_grad_write_into_view_keeps_history():
    xs, _, _ = _data(4)
    res = []
    for lib in (flow, torch):
        x = lib.tensor(xs, requires_grad=True)
        y = x * 2
        fn = y.grad_fn
        with lib.no_grad():
            y[:, 0].mul_(5)
        assert y.grad_fn is fn
        (y * 1).sum().backward()
        res.append(x.grad.numpy())
    np.testing.assert_array_equal(res[0], res[1])


def test_write_into_expanded_view_raises_as_torch():
    for lib in (flow, torch):
        y = lib.tensor(np.ones(3)) * 1
        with pytest.raises(RuntimeError, match="more than one element"):
            y.expand(2, 3).add_(1)


def test_double_backward_through_rebased_base():
    xs, ws, _ = _data(5)
    res = []
    for lib in (flow, torch):
        x = lib.tensor(xs, requires_grad=True)
        w = lib.tensor(ws, requires_grad=True)
        y = x * x
        y[:, 1:3].mul_(w[:, :2])
        y.diagonal().add_(x.diagonal() ** 2)
        (g,) = lib.autograd.grad((y * y).sum(), x, create_graph=True)
        (g * w).sum().backward()
        res.append((g.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_issue_example():
    x = flow.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 1
    y[:, 0].mul_(2)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 1, 1], [2, 1, 1]])
    assert y.grad_fn.name() == "CopySlices"


def _vec(lib, glob: bool = False):
    """A leaf (4,) needing grad, eager local, or global (broadcast on cpu rank 0)."""
    if glob:
        return flow.tensor(np.ones(4), placement=flow.placement("cpu", [0]),
                           sbp=flow.sbp.broadcast, requires_grad=True)
    return lib.tensor(np.ones(4), requires_grad=True)


@pytest.mark.parametrize("glob", [False, True], ids=["local", "global"])
@pytest.mark.parametrize("chain", [False, True], ids=["view", "view_of_view"])
@pytest.mark.parametrize("write", ["mul_", "copy_"])
def test_write_with_grad_into_view_made_under_no_grad_raises_as_torch(write, chain, glob):
    for lib in (flow,) if glob else (flow, torch):
        w = _vec(lib, glob)
        y = w * 1
        with lib.no_grad():
            v = y[0:3]
        if chain:  # a view (made with grad mode on) of such a view is one too
            v = v[0:2]
        with pytest.raises(RuntimeError, match="no_grad"):
            v.mul_(3) if write == "mul_" else v.copy_(w[0:len(v)] * 5)


@pytest.mark.parametrize("glob", [False, True], ids=["local", "global"])
def test_view_made_and_written_under_no_grad_still_works(glob):
    """The running-statistics pattern: both under no_grad(); the history is kept."""
    res = []
    for lib in (flow,) if glob else (torch, flow):
        w = _vec(lib, glob)
        y = w * 2
        with lib.no_grad():
            v = y[0:2]
            v.mul_(3)
            v.add_(1)
        (y * y).sum().backward()
        res.append((y.detach().numpy(), w.grad.numpy()))
    ref = res[0] if not glob else ([7, 7, 2, 2], [28, 28, 8, 8])
    for a, b in zip(res[-1], ref):
        np.testing.assert_array_equal(a, b)


def test_no_grad_view_of_a_tensor_needing_no_grad_takes_writes_as_torch():
    for lib in (flow, torch):
        b = lib.tensor(np.ones(4))
        with lib.no_grad():
            v = b[1:3]
        v.mul_(3)  # neither the write nor the base needs grad: allowed
        np.testing.assert_array_equal(b.numpy(), [1, 3, 3, 1])


def _write_after_backward(glob: bool, view):
    """A write into a view after a backward through it (which frees the saved tensors of the
    view's history), then a backward through the base: gradients accumulate."""
    w = _vec(flow, glob)
    y = w + 0  # (torch's w * 1 saves w, freed by the first backward)
    v = view(y)
    (v * v).sum().backward()
    v.mul_(3)
    (y * 1).sum().backward()
    return y.numpy(), w.grad.numpy()


@pytest.mark.parametrize("view", [lambda y: y[0:2], lambda y: y[1:].reshape(3)[::2],
                                  lambda y: y.reshape(2, 2).t()[1]],
                         ids=["slice", "chain", "transpose_select"])
def test_global_write_into_view_after_a_backward_as_local(view):
    """Global views remember where they lie in their base when made (not by walking saved
    inputs, which a backward frees)."""
    local, glob = _write_after_backward(False, view), _write_after_backward(True, view)
    for a, b in zip(glob, local):
        np.testing.assert_array_equal(a, b)
    res = []
    for lib in (flow, torch):
        w = lib.tensor(np.ones(4), requires_grad=True)
        y = w + 0  # (torch's w * 1 saves w, freed by the first backward)
        v = view(y)
        (v * v).sum().backward()
        v.mul_(3)
        (y * 1).sum().backward()
        res.append(w.grad.numpy())
    np.testing.assert_array_equal(res[0], res[1])
    np.testing.assert_array_equal(local[1], res[1])
