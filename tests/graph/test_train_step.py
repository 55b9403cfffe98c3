"""A training nn.Graph counts its steps in ``state_dict()["System-Train-TrainStep"]`` (OneFlow's
int64 tensor of shape (1,)): one per call that runs the update (one per call with gradient
accumulation, none for a step float16 AMP skipped), restored by ``load_state_dict``, so a
graph resumed from a checkpoint continues as the uninterrupted one, in asynchronous and in
blocking mode, without recompiling for it."""
import time

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.runtime import actors as actor_mod

pytestmark = pytest.mark.timeout(120)
STEP = "System-Train-TrainStep"


class _Train(nn.Graph):
    def __init__(self, model, opt, sch=None, acc=1, amp=None):
        super().__init__()
        self.model = model
        self.add_optimizer(opt, lr_sch=sch)
        if acc > 1:
            self.config.set_gradient_accumulation_steps(acc)
        if amp is not None:
            self.config.enable_amp(True, dtype=amp)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def _make(seed=0, acc=1, amp=None):
    flow.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sch = flow.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    return model, opt, _Train(model, opt, sch, acc, amp)


def _batches(n):
    rng = np.random.default_rng(4)
    return [(flow.tensor(rng.standard_normal((8, 6)).astype(np.float32)),
             flow.tensor(rng.integers(0, 3, 8))) for _ in range(n)]


def _step(g) -> int:
    t = g.state_dict()[STEP]
    assert t.dtype == flow.int64 and tuple(t.shape) == (1,) and t.is_local
    return int(t.numpy()[0])


def _momenta(opt) -> list:
    return [s["momentum_buffer"].numpy().copy() for s in opt.state.values()]


@pytest.fixture(params=[False, True], ids=["async", "blocking"])
def mode(request):
    before = flow.vm.is_blocking()
    flow.vm.set_blocking(request.param)
    yield request.param
    flow.vm.set_blocking(before)


def test_a_resumed_graph_continues_as_the_uninterrupted_one(tmp_path, mode):
    batches = _batches(5)
    m1, opt1, g1 = _make(0)
    assert _step(g1) == 0  # before the first call too
    for x, y in batches[:3]:
        g1(x, y)
    path = str(tmp_path / "g.af")
    flow.save(g1.state_dict(), path)  # right after the calls were issued
    for x, y in batches[3:]:
        g1(x, y)

    sd = flow.load(path)
    assert list(sd) == ["model", "_optimizer0", "_lr_scheduler0", STEP]
    assert sd[STEP].dtype == flow.int64 and sd[STEP].numpy().tolist() == [3]
    m2, opt2, g2 = _make(1)  # other initial values: everything comes from the file
    g2.load_state_dict(sd)
    assert _step(g2) == 3
    for x, y in batches[3:]:
        g2(x, y)
    assert _step(g1) == _step(g2) == 5
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(_momenta(opt1), _momenta(opt2)):
        np.testing.assert_array_equal(a, b)
    assert g2._optimizers[0].lr_scheduler.last_epoch == 5  # the scheduler counts calls too
    assert g1.compile_count == g2.compile_count == 1


def test_loading_into_a_compiled_graph_restores_the_count(mode):
    batches = _batches(4)
    _, _, g1 = _make(0)
    for x, y in batches[:2]:
        g1(x, y)
    sd = {k: v for k, v in g1.state_dict().items()}
    _, _, g2 = _make(1)
    for x, y in batches:
        g2(x, y)
    assert _step(g2) == 4
    g2.load_state_dict(sd)  # (recompiles: the optimizer state was replaced)
    assert _step(g2) == 2
    g2(*batches[2])
    assert _step(g2) == 3


def test_the_step_is_counted_in_the_job_and_the_calls_do_not_recompile():
    _, _, g = _make(0)
    for x, y in _batches(6):
        g(x, y)
    assert _step(g) == 6 and g.compile_count == 1
    ops = g.full_job.ops
    var = [o for o in ops if o.op_type == "variable" and o.attrs["name"] == STEP]
    assert len(var) == 1 and var[0].attrs["kind"] == "train_step"
    writers = [o for o in ops if o.op_type == "assign" and o.inputs[0] == f"{STEP}/0"]
    assert len(writers) == 1
    updates = {o.name for o in ops if "update" in o.op_type}
    assert updates and updates <= set(writers[0].ctrl_inputs)  # it counts after the update


@pytest.mark.parametrize("by_vm", ["0", "1"], ids=["runtime", "reference"])
def test_a_call_that_fails_before_its_update_counts_no_step(monkeypatch, by_vm):
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", by_vm)
    _, _, g = _make(0)
    (x, y), = _batches(1)
    g(x, y)
    with pytest.raises(RuntimeError, match="out of bounds"):
        g(x, flow.tensor([0, 1, 2, 9, 0, 1, 2, 0])).item()
    assert _step(g) == 1
    g(x, y)
    assert _step(g) == 2


@pytest.mark.skipif(flow.vm.is_blocking(), reason="ACTORFLOW_EAGER_BLOCKING=1: no call in flight")
def test_reading_the_step_waits_for_the_calls_in_flight(monkeypatch):
    _, _, g = _make(0)
    batches = _batches(4)
    g(*batches[0]).numpy()
    real = actor_mod.LightKernelActor.compute

    def slow(self, ins, out):
        time.sleep(0.005)
        return real(self, ins, out)

    monkeypatch.setattr(actor_mod.LightKernelActor, "compute", slow)
    for x, y in batches[1:]:
        g(x, y)
    assert not g._last.last_call.done  # the last call is still running
    assert _step(g) == 4


def test_gradient_accumulation_counts_one_step_per_call():
    _, _, g = _make(0, acc=2)
    for x, y in _batches(3):
        g(x, y)
    assert _step(g) == 3
    assert len(g.full_job.ops_of_type("micro_unpack")) > 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the inf input makes NaNs on purpose
def test_a_step_skipped_by_the_grad_scaler_is_not_counted():
    _, _, g = _make(0, amp=flow.float16)
    (x, y), = _batches(1)
    g(x, y)
    g(x, y)
    bad = x.numpy().copy()
    bad[0, 0] = np.inf
    g(flow.tensor(bad), y)  # a non-finite gradient (tanh(inf) = 1, its gradient 0 * inf)
    assert g._grad_scaler.state_dict()["scale"] == 2.0 ** 15  # the step was skipped
    assert _step(g) == 2
    g(x, y)
    assert _step(g) == 3


def test_strict_loading_checks_the_step():
    batches = _batches(2)
    _, _, g1 = _make(0)
    g1(*batches[0])
    sd = dict(g1.state_dict())
    _, _, g2 = _make(1)
    no_step = {k: v for k, v in sd.items() if k != STEP}
    with pytest.raises(KeyError, match=r"missing entries \['System-Train-TrainStep'\]"):
        g2.load_state_dict(no_step)
    g2.load_state_dict(no_step, strict=False)  # the count stays as it was
    assert _step(g2) == 0
    for bad, err, msg in [(flow.tensor([1.5]), ValueError, "integer tensor of shape"),
                          (flow.tensor([[1, 2]]), ValueError, r"shape \(1, 2\)"),
                          ("3", TypeError, "must be a tensor")]:
        with pytest.raises(err, match=msg):
            g2.load_state_dict(dict(sd, **{STEP: bad}))
    g2.load_state_dict(dict(sd, **{STEP: 7}))
    assert _step(g2) == 7


def test_a_graph_without_optimizers_has_no_step():
    class Eval(nn.Graph):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def build(self, x):
            return self.model(x)

    m, _, train = _make(0)
    g = Eval(m)
    g(_batches(1)[0][0])
    assert STEP not in g.state_dict() and list(g.state_dict()) == ["model"]
    with pytest.raises(KeyError, match=r"unexpected entries \['System-Train-TrainStep', "):
        g.load_state_dict(train.state_dict())


def test_the_step_follows_parameters_made_global_after_it_was_made():
    m, _, g = _make(0)
    (x, y), = _batches(1)
    g(x, y)
    assert _step(g) == 1
    pl = flow.placement.all("cpu")  # a world of one: global tensors on rank 0
    for p in m.parameters():
        p.data = p.detach().to_global(placement=pl, sbp=flow.sbp.broadcast)
    t = g.state_dict()[STEP]
    assert t.is_global and t.placement == pl and t.sbp == (flow.sbp.broadcast,)
    assert t.numpy().tolist() == [1]
