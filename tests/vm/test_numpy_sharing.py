"""Memory shared with NumPy gives PyTorch's answers whatever the timing.

Each case first occupies the worker with a slow instruction on unrelated memory, so that an op
issued next waits in the queue: without the VM seeing the sharing, it would run after the
caller's later NumPy write (or the caller's read would come before it). Every answer is
PyTorch's, computed on the same arrays synchronously.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import actorflow as flow
from actorflow import vm

pytestmark = pytest.mark.timeout(120)


def busy(delay: float = 0.1):
    """Occupy the current worker for ``delay`` seconds (touches no tensor)."""
    vm.launch(lambda: time.sleep(delay), name="busy")


SHAPE = (300, 40)  # large enough that no kernel runs inline


def _base() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE) / 7


def test_from_numpy_then_writing_the_array_before_the_op_ran():
    # a staging buffer reused per batch: each batch's result uses that batch's values
    buf = np.empty(SHAPE, np.float32)
    t = flow.from_numpy(buf)
    outs, want = [], []
    for k in range(4):
        buf[...] = k
        want.append((torch.from_numpy(buf) * 2 + 1).sum().item())
        busy(0.05)
        outs.append((t * 2 + 1).sum())
    assert [o.item() for o in outs] == want


@pytest.mark.parametrize("side", ["right", "left", "method", "inplace_operand"])
def test_an_ndarray_operand_changed_after_the_op_is_issued(side):
    x, b = flow.tensor(_base()), _base() + 1
    expect = {"right": _base() + (_base() + 1), "left": (_base() + 1) - _base(),
              "method": _base() * (_base() + 1), "inplace_operand": _base() + (_base() + 1)}
    busy()
    if side == "right":
        y = x + b
    elif side == "left":
        y = flow.sub(b, x)
    elif side == "method":
        y = x.mul(b)
    else:
        y = x.clone()
        y.add_(b)
    b[...] = -100.0
    np.testing.assert_allclose(y.numpy(), expect[side], rtol=1e-6)


@pytest.mark.parametrize("export", ["numpy", "asarray", "view_numpy"])
def test_writing_an_exported_array_after_issuing_an_op(export):
    x = flow.tensor(_base())
    a = {"numpy": lambda: x.numpy(), "asarray": lambda: np.asarray(x),
         "view_numpy": lambda: x[1:].numpy()}[export]()
    ref = torch.from_numpy(_base())
    busy()
    y = x * 2
    z = x.sum(0)
    a[...] = 7.0  # the caller writes through the array right after the ops returned
    np.testing.assert_allclose(y.numpy(), (ref * 2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), ref.sum(0).numpy(), rtol=1e-5)


@pytest.mark.parametrize("write", ["add_", "view_add_", "copy_", "setitem", "zero_"])
def test_an_in_place_op_is_in_the_exported_array_when_it_returns(write):
    x = flow.tensor(_base())
    a = x.numpy()
    ta = torch.from_numpy(_base())
    busy()
    if write == "add_":
        x.add_(1)
        ta.add_(1)
    elif write == "view_add_":
        x[2:5].add_(3)
        ta[2:5].add_(3)
    elif write == "copy_":
        x.copy_(flow.ones(*SHAPE))
        ta.copy_(torch.ones(*SHAPE))
    elif write == "setitem":
        x[0] = 5.0
        ta[0] = 5.0
    else:
        x.zero_()
        ta.zero_()
    np.testing.assert_array_equal(a, ta.numpy())  # read without any sync point


def test_as_tensor_shares_both_ways():
    arr = _base()
    t = flow.as_tensor(arr)
    busy()
    t.mul_(2)
    np.testing.assert_array_equal(arr, _base() * 2)
    busy()
    y = t + 1
    arr[...] = 0
    np.testing.assert_array_equal(y.numpy(), _base() * 2 + 1)


def test_copies_stay_asynchronous_and_unshared():
    arr = _base()
    t = flow.tensor(arr)           # a copy: nothing shared
    assert not t._h.storage.shared
    busy(0.3)
    t0 = time.perf_counter()
    y = t * 2                      # queued behind the busy instruction: returns at once
    assert time.perf_counter() - t0 < 0.25 or vm.is_blocking()
    arr[...] = 1
    np.testing.assert_array_equal(y.numpy(), _base() * 2)


def test_an_op_on_shared_memory_raises_its_error_at_the_call():
    x = flow.from_numpy(np.array([1, 2], dtype=np.int64))
    with pytest.raises(RuntimeError, match="floor_divide"):
        x // 0
    np.testing.assert_array_equal((x + 1).numpy(), [2, 3])  # nothing else is affected


class _Double(flow.nn.Graph):
    def build(self, x):
        return x * 2 + 1


def test_a_graph_call_on_a_reused_staging_buffer():
    g = _Double()
    buf = np.zeros((64, 8), np.float32)
    t = flow.from_numpy(buf)
    outs = []
    for k in range(5):
        buf[...] = k
        busy(0.02)
        outs.append(g(t))
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), np.full((64, 8), 2 * k + 1, np.float32))
