"""A training step of an nn.Graph that fails loses nothing: parameters and optimizer state stay
as before the step (or, when an update had started, readable and overwritable, and the error
says so), every way of using them keeps working, and the next good call trains normally.
Checked on both executors (the actor runtime and ``ACTORFLOW_RUN_GRAPH_BY_VM=1``)."""
from __future__ import annotations

import io
import os

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["runtime", "reference"])
def executor(request, monkeypatch):
    if request.param == "reference":
        monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "1")
    else:
        monkeypatch.delenv("ACTORFLOW_RUN_GRAPH_BY_VM", raising=False)
    return request.param


def _setup(make_opt):
    flow.manual_seed(0)
    m = nn.Linear(4, 3)
    opt = make_opt(m.parameters())

    class Step(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = F.cross_entropy(self.m(x), y)
            loss.backward()
            return loss

    return m, opt, Step()


def _state(m, opt) -> dict:
    out = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    for i, st in enumerate(opt.state.values()):
        for k, v in st.items():
            if isinstance(v, flow.Tensor):
                out[f"opt{i}.{k}"] = v.numpy().copy()
    return out


OPTIMIZERS = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.1),
    "momentum": lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9),
    "adam": lambda ps: flow.optim.Adam(ps, lr=0.01),
}


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_a_failed_step_leaves_parameters_and_state_as_before(executor, opt_name):
    x = flow.tensor(np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32))
    good, bad = flow.tensor([0, 1]), flow.tensor([0, 7])
    m, opt, g = _setup(OPTIMIZERS[opt_name])
    g(x, good).item()
    before = _state(m, opt)
    with pytest.raises(RuntimeError,
                       match=r"(?s)cross_entropy.*out of bounds.*as they were before"):
        g(x, bad).item()
    after = _state(m, opt)
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    # every use of the parameters works: eager ops, save, load, copy_
    (m(x).sum() * 2).item()
    buf = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"failed_step_{os.getpid()}.st")
    flow.save(m.state_dict(), buf)
    m.load_state_dict(flow.load(buf))
    os.remove(buf)
    with flow.no_grad():
        m.bias.copy_(m.bias * 1.0)
    # the next good call trains exactly as if the bad one had never been made
    losses = [g(x, good).item() for _ in range(3)]
    m2, opt2, g2 = _setup(OPTIMIZERS[opt_name])
    g2(x, good).item()
    ref = [g2(x, good).item() for _ in range(3)]
    np.testing.assert_allclose(losses, ref, rtol=1e-6)
    for k, v in _state(m2, opt2).items():
        np.testing.assert_allclose(_state(m, opt)[k], v, rtol=1e-6, err_msg=k)


def test_outputs_of_a_failed_call_carry_the_error_state_does_not(executor):
    m, opt, g = _setup(OPTIMIZERS["sgd"])
    x = flow.ones(2, 4)
    box = []
    with pytest.raises(RuntimeError, match="cross_entropy"):
        box.append(g(x, flow.tensor([0, 9])))  # blocking mode raises here
        box[0].item()                          # async mode: at the sync point
    if box:
        with pytest.raises(RuntimeError, match="cross_entropy"):  # the output stays failed
            (box[0] + 1).item()
    io.StringIO(repr(m.weight))  # printing the parameter works
    assert np.isfinite(m.weight.numpy()).all()


def test_eager_ops_on_an_output_issued_before_the_call_finished_read_its_values(executor):
    class Slow(nn.Graph):
        def build(self, a):
            for _ in range(6):
                a = flow.matmul(a, a) * 0.01
            return a.sum(), a

    g = Slow()
    x = flow.tensor(np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32))
    for _ in range(3):
        s, a = g(x)
        follow = (s.float() + 1, a * 2)  # issued at once, ordered after the call
        ref_s, ref_a = s.numpy(), a.numpy()
        np.testing.assert_allclose(follow[0].numpy(), ref_s + 1, rtol=1e-6)
        np.testing.assert_allclose(follow[1].numpy(), ref_a * 2, rtol=1e-6)
