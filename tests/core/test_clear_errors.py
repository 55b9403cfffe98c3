"""Bad arguments raise errors that name the op and what was wrong, where PyTorch refuses them
too, never garbage or NumPy's words (issue 25, item 9)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.errors import KernelError
from tests.helpers import torch

pytestmark = pytest.mark.timeout(60)
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the reference")


@pytest.mark.parametrize("make", [
    lambda m: m.ones("3"), lambda m: m.ones(2.9), lambda m: m.zeros((2, 2.9)),
    lambda m: m.empty("3"), lambda m: m.randn(2.9), lambda m: m.rand([2, "3"]),
    lambda m: m.full((2.5,), 1.0), lambda m: m.ones(2, None),
    lambda m: m.zeros(2).new_zeros(1.5),
])
def test_sizes_must_be_ints(make):
    with pytest.raises(TypeError, match=r"size\[\d\] .* must be an int, got"):
        make(flow)
    if torch is not None:
        with pytest.raises(TypeError):
            make(torch)


def test_sizes_that_are_ints_still_work():
    assert flow.ones(np.int64(2), 3).shape == (2, 3)
    assert flow.zeros(flow.tensor(4)).shape == (4,)
    assert flow.empty(flow.Size([2, 0])).shape == (2, 0)
    assert flow.randn([3]).shape == (3,)
    with pytest.raises(ValueError, match="negative dimension"):
        flow.ones(2, -1)


@pytest.mark.parametrize("make, words", [
    (lambda m: m.nn.Linear("2", 3), "Linear: in_features must be an int, got str '2'"),
    (lambda m: m.nn.Linear(2, 3.5), "Linear: out_features must be an int, got float 3.5"),
    (lambda m: m.nn.Conv2d("2", 3, 3), "Conv2d: in_channels must be an int, got str"),
    (lambda m: m.nn.Conv1d(2, 4, 3, groups=2.0), "Conv1d: groups must be an int"),
])
def test_module_sizes_must_be_ints(make, words):
    with pytest.raises(TypeError) as e:
        make(flow)
    assert words in str(e.value)
    if torch is not None:
        with pytest.raises(TypeError):
            make(torch)


def test_normal_std_must_be_nonnegative():
    for call in (lambda m: m.normal(0.0, -1.0, (3,)), lambda m: m.normal(1.0, float("nan"), (2,))):
        with pytest.raises(RuntimeError, match="normal: std must be >= 0"):
            call(flow)
        if torch is not None:
            with pytest.raises(RuntimeError):
                call(torch)
    assert flow.normal(0.0, 0.0, (3,)).numpy().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("p", [1.5, -0.5, float("nan")])
def test_bernoulli_probabilities_in_unit_interval(p):
    with pytest.raises(RuntimeError, match=r"bernoulli: p must be in \[0, 1\]"):
        flow.bernoulli(flow.zeros(3), p=p)
    with pytest.raises(KernelError, match=r"bernoulli: probabilities must be in \[0, 1\]"):
        flow.bernoulli(flow.tensor([0.5, p, 0.2])).numpy()
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.bernoulli(torch.tensor([0.5, p, 0.2]))
    edge = flow.bernoulli(flow.tensor([0.0, 1.0, 1.0, 0.0])).numpy()
    np.testing.assert_array_equal(edge, [0.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_masked_fill_refuses_float_masks(dtype):
    x = flow.zeros(3)
    mask = flow.tensor([1.0, 0.0, 1.0], dtype=getattr(flow, dtype))
    with pytest.raises(RuntimeError, match="masked_fill: the mask must be a bool tensor"):
        x.masked_fill(mask, 2.0)
    with pytest.raises(RuntimeError, match="masked_fill: the mask must be a bool tensor"):
        x.masked_fill_(mask, 2.0)
    if torch is not None:
        with pytest.raises(RuntimeError):
            torch.zeros(3).masked_fill(torch.tensor([1.0, 0.0, 1.0]), 2.0)
    got = x.masked_fill(flow.tensor([True, False, True]), 2.0).numpy()
    np.testing.assert_array_equal(got, [2.0, 0.0, 2.0])


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.0}, {"momentum": 0.0, "dampening": 0.5}])
def test_nesterov_without_momentum_is_a_plain_step(kw):
    # OneFlow takes nesterov=True without momentum (its test_optim_sgd draws it) and steps
    # plainly; PyTorch refuses it. actorflow follows OneFlow, with a warning.
    p = nn.Parameter(flow.ones(3))
    with pytest.warns(UserWarning, match="nesterov takes effect only with momentum > 0"):
        opt = flow.optim.SGD([p], lr=0.1, nesterov=True, **kw)
    p.grad = flow.tensor([1.0, 2.0, 3.0])
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.9, 0.8, 0.7], rtol=1e-6)
    if torch is not None:
        with pytest.raises(ValueError):
            torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1, nesterov=True, **kw)
    flow.optim.SGD([nn.Parameter(flow.zeros(3))], lr=0.1, momentum=0.9, nesterov=True)


B = [True, False, True]


@pytest.mark.parametrize("call", [
    lambda m, b: b - b, lambda m, b: b - 1, lambda m, b: 1 - b, lambda m, b: b - 1.5,
    lambda m, b: m.tensor([1, 2, 3]) - b, lambda m, b: -b, lambda m, b: m.neg(b),
    lambda m, b: m.fmod(b, b), lambda m, b: m.remainder(b, b), lambda m, b: b // b,
    lambda m, b: b ** b, lambda m, b: m.round(b), lambda m, b: m.tensor([1.0, 2.0, 3.0]) - True,
    lambda m, b: m.abs(b), lambda m, b: b.abs(), lambda m, b: m.relu(b), lambda m, b: m.floor(b),
    lambda m, b: m.ceil(b), lambda m, b: m.trunc(b), lambda m, b: m.matmul(b, b),
    lambda m, b: b.reshape(1, 3) @ b.reshape(3, 1), lambda m, b: m.mm(b.reshape(1, 3),
                                                                     b.reshape(3, 1)),
    lambda m, b: m.bmm(b.reshape(1, 1, 3), b.reshape(1, 3, 1)), lambda m, b: m.dot(b, b),
    lambda m, b: m.mv(b.reshape(1, 3), b), lambda m, b: b.argmax(), lambda m, b: b.argmin(dim=0),
])
def test_bool_arithmetic_refused_at_the_call_as_torch(call):
    with pytest.raises((RuntimeError, TypeError)) as e:
        call(flow, flow.tensor(B))
    assert not isinstance(e.value, KernelError), "refused at inference, not in the kernel"
    assert "bool" in str(e.value)
    if torch is not None:
        with pytest.raises((RuntimeError, NotImplementedError)):
            call(torch, torch.tensor(B))


@needs_torch
@pytest.mark.parametrize("call", [
    lambda m, b: b + b, lambda m, b: b * b, lambda m, b: b / b, lambda m, b: b % 2,
    lambda m, b: b // 2, lambda m, b: m.fmod(b, 2), lambda m, b: b ** 2, lambda m, b: 2 ** b,
    lambda m, b: m.square(b), lambda m, b: b.sum(), lambda m, b: m.remainder(b, m.tensor(3)),
    lambda m, b: m.maximum(b, b), lambda m, b: m.exp(b), lambda m, b: b + 1,
    lambda m, b: m.sign(b), lambda m, b: m.clamp(b, 0, 1), lambda m, b: m.cumsum(b, 0),
    lambda m, b: b.prod(), lambda m, b: b.min(), lambda m, b: m.outer(b, b),
    lambda m, b: m.sqrt(b), lambda m, b: b * 2.5,
])
def test_bool_arithmetic_promoted_as_torch(call):
    got, want = call(flow, flow.tensor(B)), call(torch, torch.tensor(B))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64), equal_nan=True)


def test_huge_allocation_names_the_op_and_bytes():
    for make, op in ((lambda: flow.empty(10 ** 6, 10 ** 7), "empty"),
                     (lambda: flow.zeros(10 ** 6, 10 ** 7), "constant"),
                     (lambda: flow.ones(2 ** 40, 2 ** 40, dtype=flow.float64), "constant"),
                     (lambda: flow.zeros(2).expand(10 ** 6, 10 ** 7, 2).contiguous(), None)):
        with pytest.raises(MemoryError) as e:
            make()
        msg = str(e.value)
        assert "can't allocate" in msg and "bytes" in msg and "for an output of shape" in msg
        if op is not None:
            assert msg.startswith(op + ":")


@pytest.mark.parametrize("arg", ["abc", 3, None, [1.0, 2.0]])
def test_module_called_with_a_non_tensor(arg):
    for m in (nn.Linear(2, 3), nn.Sequential(nn.Linear(2, 3), nn.ReLU()), nn.ReLU()):
        with pytest.raises(TypeError, match=r"input 0 must be a Tensor, got "
                                            f"{type(arg).__name__}"):
            m(arg)


def test_autograd_grad_and_backward_need_tensors():
    x = flow.ones(2, requires_grad=True)
    y = (x * 2).sum()
    cases = [
        (lambda: flow.autograd.grad(None, x), "autograd.grad: outputs must be a Tensor"),
        (lambda: flow.autograd.grad([None], [x]), r"autograd.grad: outputs\[0\] must be a Tensor"),
        (lambda: flow.autograd.grad(y, None), "autograd.grad: inputs must be a Tensor"),
        (lambda: flow.autograd.grad(y, [x, 3]), r"inputs\[1\] must be a Tensor, got int"),
        (lambda: flow.autograd.backward(None), "autograd.backward: tensors must be a Tensor"),
        (lambda: flow.autograd.backward(y, inputs=5), "autograd.backward: inputs must be a"),
    ]
    for call, words in cases:
        with pytest.raises(TypeError, match=words):
            call()
    (g,) = flow.autograd.grad(y, (t for t in [x]))  # any iterable of tensors, as PyTorch
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])
