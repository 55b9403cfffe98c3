"""The autograd engine: backward, autograd.grad, hooks, grad modes, custom Functions and the
checks on in-place changes."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import actorflow as flow
from tests.helpers import gradcheck


def _leaf(values, dtype=flow.float32):
    return flow.tensor(values, dtype=dtype, requires_grad=True)


def test_backward_retain_graph_and_accumulation():
    x = _leaf([1.0, 2.0, 3.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    y.backward()  # gradients accumulate on leaves
    assert x.grad.tolist() == [4.0, 8.0, 12.0]
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()


def test_second_backward_without_retain_graph_fails():
    x = _leaf([0.5, 1.0])
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_second_backward_fails_only_where_freed_saved_tensors_are_read():
    import torch
    a = np.random.RandomState(0).rand(3, 4)
    b = np.random.RandomState(1).rand(3, 4)
    res = {}
    for lib in (flow, torch):
        x = lib.tensor(a, requires_grad=True)
        y = lib.tensor(b, requires_grad=True)
        z = x + y  # add's gradient reads no saved tensor: backward may pass it again
        for _ in range(10):
            z.sum().backward()
        w = z * z  # mul's does
        w.sum().backward()
        z.sum().backward()
        with pytest.raises(RuntimeError, match="second time"):
            w.sum().backward()
        res[lib] = (x.grad.numpy().copy(), y.grad.numpy().copy())
    for f, t in zip(res[flow], res[torch]):
        np.testing.assert_allclose(f, t, rtol=1e-12)
    np.testing.assert_allclose(res[flow][0], 11 + 2 * (a + b), rtol=1e-12)


def test_custom_function_second_backward_needs_saved_tensors_to_fail():
    class Double(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Square(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = _leaf([1.0, 3.0])
    y = Double.apply(x)
    y.sum().backward()
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]
    s = Square.apply(x)
    s.sum().backward()
    assert x.grad.tolist() == [6.0, 10.0]
    with pytest.raises(RuntimeError, match="second time"):
        s.sum().backward()


def test_accumulation_across_graphs_and_tensor_used_twice():
    x = _leaf([3.0])
    (x * 2).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0 + 6.0]
    a = _leaf([3.0, -1.0])
    (a * a + a).sum().backward()  # a reaches the loss along three edges
    assert a.grad.tolist() == [7.0, -1.0]
    b = _leaf([2.0])
    c = b * 1
    (c * c * c).sum().backward()
    assert b.grad.tolist() == [12.0]


def test_gradcheck_through_core_ops():
    gradcheck(lambda x, y: (x * y + x.exp()) / (y * y + 1.0), np.random.default_rng(0)
              .standard_normal((2, 3)), np.random.default_rng(1).standard_normal((2, 3)))


def test_nonscalar_backward_needs_gradient():
    x = _leaf([1.0, 2.0])
    y = x * 3
    with pytest.raises(RuntimeError, match="only for scalar outputs.*\\(2,\\)"):
        y.backward()
    with pytest.raises(RuntimeError, match="does not match"):
        y.backward(flow.tensor([1.0]))
    y.backward(flow.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [3.0, 30.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        flow.ones(2).sum().backward()


def test_autograd_grad_and_second_derivative():
    x = _leaf([1.0, 2.0], flow.float64)
    y = x ** 3
    (g,) = flow.autograd.grad(y.sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0] and g.requires_grad
    (g2,) = flow.autograd.grad(g.sum(), x)
    assert g2.tolist() == [6.0, 12.0]
    assert x.grad is None, "autograd.grad must not touch .grad"
    z = _leaf([2.0])
    (z * z * z).backward(create_graph=True)
    first = z.grad
    assert first.tolist() == [12.0] and first.requires_grad
    z.grad = None
    first.backward()
    assert z.grad.tolist() == [12.0]


def test_autograd_grad_options():
    a, b = _leaf([1.0]), _leaf([2.0])
    with pytest.raises(RuntimeError, match="not used"):
        flow.autograd.grad((a * 2).sum(), [a, b])
    ga, gb = flow.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)
    assert ga.tolist() == [2.0] and gb is None
    x = _leaf([1.0, 2.0])
    (gx,) = flow.autograd.grad(x * 2, x, grad_outputs=flow.tensor([1.0, 5.0]))
    assert gx.tolist() == [2.0, 10.0]
    y = (x * x).sum()
    flow.autograd.grad(y, x, retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]
    mid = x * 1
    (gm,) = flow.autograd.grad((mid * mid).sum(), mid)  # w.r.t. a non-leaf
    assert gm.tolist() == [2.0, 4.0]


def test_backward_inputs_and_multiple_roots():
    a, b = _leaf([1.0]), _leaf([2.0])
    (a * b).sum().backward(inputs=[a])
    assert a.grad.tolist() == [2.0] and b.grad is None
    x = _leaf([1.0, 2.0])
    flow.autograd.backward([(x * 2).sum(), (x * x).sum()])
    assert x.grad.tolist() == [4.0, 6.0]


def test_retain_grad():
    a = _leaf([1.0, 2.0])
    b = a * 2
    b.retain_grad()
    assert b.retains_grad
    (b * b).sum().backward()
    assert b.grad.tolist() == [4.0, 8.0] and a.grad.tolist() == [8.0, 16.0]
    c = a * 3
    assert c.grad is None  # non-leaf without retain_grad
    with pytest.raises(RuntimeError):
        flow.ones(1).retain_grad()


def test_retained_grad_sees_hook_changes():
    a = _leaf([1.0, 2.0])
    b = a * 2
    b.retain_grad()
    b.register_hook(lambda g: g * 10)
    b.sum().backward()
    assert b.grad.tolist() == [10.0, 10.0] and a.grad.tolist() == [20.0, 20.0]


def test_hooks_modify_and_remove():
    a = _leaf([1.0, 2.0])
    handle = a.register_hook(lambda g: g * 10)
    (a * 1).sum().backward()
    assert a.grad.tolist() == [10.0, 10.0]
    handle.remove()
    a.grad = None
    (a * 1).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]
    x = _leaf([1.0])
    mid = x * 1
    calls = []
    mid.register_hook(lambda g: calls.append(g.item()))
    (mid * 2 + mid * 3).sum().backward()
    assert calls == [5.0], "a hook sees the summed gradient once"
    m2 = x * 2
    m2.register_hook(lambda g: g + 1)
    m2.sum().backward()
    assert x.grad.tolist() == [5.0 + 4.0]
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        flow.ones(1).register_hook(lambda g: g)


def test_grad_setter_and_requires_grad_():
    x = flow.zeros(2)
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad_(False)
    assert not x.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        flow.zeros(2, dtype=flow.int64).requires_grad_()
    w = _leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (w * 2).requires_grad_(False)
    with pytest.raises(RuntimeError, match="shape"):
        w.grad = flow.zeros(3)
    with pytest.raises(TypeError):
        w.grad = [1.0, 2.0]
    w.grad = flow.ones(2)
    (w * 1).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]


def test_leaf_and_grad_fn_bookkeeping():
    w = _leaf([1.0])
    y = w * 2
    assert w.is_leaf and not y.is_leaf and y.grad_fn is not None
    assert "backward" in y.grad_fn.name()
    assert (flow.ones(1) * 2).is_leaf
    assert not (w > 0).requires_grad, "integer/bool results do not require grad"
    d = w.double()
    assert d.grad_fn is not None
    (d * d).sum().backward()
    assert w.grad.dtype is flow.float32 and w.grad.tolist() == [2.0]


# ---- grad modes -------------------------------------------------------------------------------

def _records(x) -> bool:
    return (x * 2).requires_grad


def test_grad_mode_context_managers():
    x = _leaf([1.0])
    with flow.no_grad():
        assert not flow.is_grad_enabled() and not _records(x)
        with flow.enable_grad():
            assert _records(x)
        assert not _records(x)
    assert flow.is_grad_enabled() and _records(x)
    with flow.set_grad_enabled(False):
        assert not _records(x)
    assert _records(x)
    with flow.inference_mode():
        assert not _records(x)
    with flow.inference_mode(False):
        assert _records(x)
    flow.set_grad_enabled(False)  # a plain call takes effect at once
    assert not flow.is_grad_enabled()
    flow.set_grad_enabled(True)
    assert flow.is_grad_enabled()


def test_grad_mode_decorators():
    x = _leaf([1.0])

    @flow.no_grad()
    def f(t):
        """keeps its docstring"""
        return _records(t)

    @flow.no_grad
    def bare(t):
        return _records(t)

    @flow.enable_grad()
    def g(t):
        return _records(t)

    @flow.set_grad_enabled(False)
    def h(t):
        return _records(t)

    @flow.inference_mode()
    def i(t):
        return _records(t)

    @flow.inference_mode
    def bare_i(t):
        return _records(t)

    assert not f(x) and not bare(x) and not h(x) and not i(x) and not bare_i(x)
    assert f.__doc__ == "keeps its docstring"
    with flow.no_grad():
        assert g(x)
    assert flow.is_grad_enabled()


def test_grad_mode_is_per_thread():
    seen = {}
    with flow.no_grad():
        t = threading.Thread(target=lambda: seen.setdefault("enabled", flow.is_grad_enabled()))
        t.start()
        t.join()
    assert seen["enabled"] is True


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with flow.no_grad():
            raise ValueError("boom")
    assert flow.is_grad_enabled()


# ---- in-place checks --------------------------------------------------------------------------

def test_inplace_on_saved_tensor_is_detected():
    a = _leaf([1.0, 2.0])
    b = a * 1
    d = b * b  # saves b
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        d.sum().backward()
    e = a.exp()  # saves its output
    e.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        e.sum().backward()
    f = a.exp()
    f.detach().mul_(2)  # a detached alias shares the version counter
    with pytest.raises(RuntimeError, match="in-place"):
        f.sum().backward()


def test_inplace_on_leaf_requiring_grad():
    a = _leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad.*in-place"):
        a.add_(1)
    with flow.no_grad():
        a.add_(1)
    assert a.tolist() == [2.0, 3.0]
    b = a * 1
    b.add_(1)  # a non-leaf may be changed in place when nothing saved it
    (b * 1).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]


_VIEW_WRITES = {  # in-place writes through a view of the tensor (PyTorch raises for each)
    "slice_mul_": lambda x: x[:2].mul_(2),
    "iadd": lambda x: x[1:].__iadd__(1),
    "setitem": lambda x: x[:2].__setitem__(0, 5.0),
    "fill_": lambda x: x[:2].fill_(0),
    "copy_": lambda x: x[1:].copy_(flow.zeros(2)),
    "unsqueeze_clamp_": lambda x: x.unsqueeze(0).clamp_(0, 0.5),
    "reshape_view_add_": lambda x: x.reshape(1, 3).add_(1),
    "split_add_": lambda x: x.split(2)[0].add_(1),
    "expand_add_": lambda x: x.expand(2, 3).add_(1),
    "view_of_view": lambda x: x.unsqueeze(1)[1:].squeeze(1).mul_(3),
    "with_grad_operand": lambda x: x[:2].mul_(flow.full((2,), 3.0, requires_grad=True)),
}


@pytest.mark.parametrize("name", sorted(_VIEW_WRITES))
def test_inplace_on_view_of_leaf_requiring_grad_raises_unless_no_grad(name):
    write = _VIEW_WRITES[name]
    x = _leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad.*in-place"):
        write(x)
    assert x.tolist() == [1.0, 2.0, 3.0]  # nothing was written
    if name == "expand_add_":
        return  # overlapping memory: not writable even under no_grad() (PyTorch neither)
    with flow.no_grad():
        write(x)  # allowed, as in PyTorch
    assert x.tolist() != [1.0, 2.0, 3.0]
    assert x.grad_fn is None and x.requires_grad


def test_inplace_on_views_that_pytorch_allows():
    x = _leaf([1.0, 2.0, 3.0])
    x.detach()[:1].mul_(2)  # a detached alias: outside autograd
    x.data[2:].add_(1)
    assert x.tolist() == [2.0, 2.0, 4.0]
    x[flow.tensor([0, 1])].add_(1)  # advanced indexing copies: not a view
    m = _leaf([[1.0, 2.0], [3.0, 4.0]])
    m.t().reshape(4).add_(1)  # a reshape that had to copy is not a view
    assert m.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    frozen = flow.ones(3)
    with flow.no_grad():
        v = frozen[:2]
    v.mul_(2.0)  # neither the base nor the write needs grad
    assert frozen.tolist() == [2.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match="under no_grad"):  # as PyTorch: the write does
        v.mul_(_leaf([2.0, 2.0]))
    assert frozen.tolist() == [2.0, 2.0, 1.0]


def test_leaf_written_by_an_op_whose_inputs_need_no_grad():
    x = _leaf([1.0, 2.0])
    x.copy_(flow.zeros(2))  # OneFlow allows it (model.weight.copy_(array)); PyTorch raises
    assert x.tolist() == [0.0, 0.0] and x.grad_fn is None and x.requires_grad
    with pytest.raises(RuntimeError, match="a leaf tensor that requires grad"):
        x.mul_(_leaf([2.0, 2.0]))  # an input needs grad: autograd would record the write
    with pytest.raises(RuntimeError, match="made under no_grad"):
        with flow.no_grad():
            v = x[:1]
        v.copy_(flow.zeros(1))  # a view made under no_grad(), written with grad mode on
    assert x.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name", ["slice_mul_", "setitem", "copy_", "view_of_view"])
def test_inplace_on_view_of_leaf_raises_while_tracing_a_graph(name):
    from tests.helpers import FnGraph

    write = _VIEW_WRITES[name]

    class Model(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = flow.nn.Parameter(flow.tensor([1.0, 2.0, 3.0]))

        def forward(self, x):
            write(self.w)
            return self.w * x

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = Model()

        def build(self, x):
            return self.model(x)

    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        Step()(flow.ones(3))
    def written(t, x):
        write(t)
        return t * x

    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        FnGraph(written)(flow.nn.Parameter(flow.ones(3)), flow.ones(3))
    assert FnGraph(lambda x: written(x * 1, x))(flow.ones(3)).shape == (3,)  # a non-leaf


# ---- custom Functions -------------------------------------------------------------------------

class Exp(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def test_custom_function_exp():
    x = _leaf([0.0, 1.0, -0.5], flow.float64)
    y = Exp.apply(x)
    assert y.grad_fn is not None and "Exp" in y.grad_fn.name()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.0, 1.0, -0.5]))
    gradcheck(lambda t: Exp.apply(t) * 2, np.array([0.3, -1.2]))
    with flow.no_grad():
        assert not Exp.apply(x).requires_grad


def test_custom_function_saved_tensor_modified():
    x = _leaf([1.0])
    y = Exp.apply(x)
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_custom_function_non_tensor_args_and_grad_count():
    class Scale(flow.autograd.Function):
        @staticmethod
        def forward(ctx, factor, x):
            ctx.factor = factor
            return x * factor

        @staticmethod
        def backward(ctx, g):
            return None, g * ctx.factor

    x = _leaf([1.0, 2.0])
    Scale.apply(3.0, x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]

    class Wrong(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return (g,)

    with pytest.raises(RuntimeError, match=r"incorrect number of gradients \(expected 2, got 1\)"):
        Wrong.apply(x, _leaf([0.0, 0.0])).sum().backward()


def test_custom_function_releases_saved_tensors():
    holder = {}

    class Keep(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.clone())
            holder["ctx"] = ctx
            return x * 1

        @staticmethod
        def backward(ctx, g):
            (s,) = ctx.saved_tensors
            return g * s

    x = _leaf([2.0])
    y = Keep.apply(x)
    assert holder["ctx"]._is_data_valid()
    y.sum().backward(retain_graph=True)
    assert holder["ctx"]._is_data_valid()
    y.sum().backward()
    assert not holder["ctx"]._is_data_valid()
    with pytest.raises(RuntimeError, match="saved tensors after they were freed"):
        _ = holder["ctx"].saved_tensors  # as PyTorch: reading freed saved tensors raises
    assert x.grad.tolist() == [4.0]


def test_grad_is_grads_batched_matches_one_call_per_vector():
    from tests.helpers import torch
    a = np.random.default_rng(3).standard_normal((2, 3))
    x, tx = _leaf(a, flow.float64), torch.tensor(a, requires_grad=True)
    vs = np.random.default_rng(4).standard_normal((4, 3, 3))
    out, tout = flow.matmul(x * x, flow.tensor(a.T)), torch.matmul(tx * tx, torch.tensor(a.T))
    vs = vs[:, :2, :2]
    (g,) = flow.autograd.grad(out, [x], flow.tensor(vs), is_grads_batched=True)
    (tg,) = torch.autograd.grad(tout, [tx], torch.tensor(vs), is_grads_batched=True)
    assert tuple(g.shape) == (4, 2, 3)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), atol=1e-12)
    with pytest.raises(RuntimeError, match="If `is_grads_batched=True`.*grad_output\\[0\\] "
                                           "has shape \\(2, 2\\)"):
        flow.autograd.grad(out, [x], flow.ones(2, 2, dtype=flow.float64),
                           is_grads_batched=True)
