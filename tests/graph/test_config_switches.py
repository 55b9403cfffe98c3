"""GraphConfig switches with nothing to act on for a CPU (recorded, training unchanged), the
auto-parallel settings (NotImplementedError) and nn.Graph.set_grad_scaler (its initial scale
reaches the float16 AMP graph's loss scale)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.nn.graph.optimizer_emission import GradScalerState

pytestmark = pytest.mark.timeout(120)


class _Step(nn.Graph):
    def __init__(self, model, opt, setup):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        setup(self)

    def build(self, x, y):
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        return loss


def _train(setup, steps: int = 3):
    flow.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    g = _Step(model, opt, setup)
    x, y = flow.randn(8, 4), flow.randn(8, 2)
    losses = [float(g(x, y).numpy()) for _ in range(steps)]
    return losses, g


def test_cpu_noop_switches_are_recorded_and_change_nothing():
    def setup(g):
        g.config.allow_fuse_cast_scale(True)
        g.config.enable_cudnn_conv_heuristic_search_algo(True)
        g.config.enable_compress_memory(True)
        g.config.enable_auto_parallel(False)
    base, _ = _train(lambda g: None)
    losses, g = _train(setup)
    assert losses == base
    assert g.config.cpu_noop_switches == {
        "allow_fuse_cast_scale": True, "enable_cudnn_conv_heuristic_search_algo": True,
        "enable_compress_memory": True}


@pytest.mark.parametrize("name,args", [
    ("enable_auto_parallel", (True,)), ("enable_auto_parallel_ignore_user_sbp_config", ()),
    ("set_auto_parallel_computation_cost_ratio", (0.5,)), ("set_auto_parallel_wait_time", (1.0,)),
    ("enable_auto_parallel_trunk_algo", ()), ("enable_auto_parallel_sbp_collector", ()),
    ("enable_auto_memory", ())])
def test_auto_parallel_settings_raise(name, args):
    cfg = _train(lambda g: None, 0)[1].config
    with pytest.raises(NotImplementedError, match=f"GraphConfig.{name}: auto-parallel"):
        getattr(cfg, name)(*args)


class _OneFlowScaler:  # OneFlow's GradScaler keeps these fields
    _init_scale, _growth_factor, _backoff_factor, _growth_interval = 8.0, 2.0, 0.5, 1000


@pytest.mark.parametrize("scaler", [GradScalerState(init_scale=8.0), _OneFlowScaler()])
def test_set_grad_scaler(scaler):
    def setup(g):
        g.config.enable_amp(True, dtype=flow.float16)
        g.set_grad_scaler(scaler)
    losses, g = _train(setup, 2)
    assert np.isfinite(losses).all()
    state = g.state_dict()["_grad_scaler"]
    assert state["scale"] == 8.0 and state["growth_tracker"] == 2
    assert state["growth_interval"] == (1000 if isinstance(scaler, _OneFlowScaler) else 2000)


def test_set_grad_scaler_errors():
    with pytest.raises(RuntimeError, match="enable_amp"):
        _train(lambda g: g.set_grad_scaler(GradScalerState()), 0)

    def bad(g):
        g.config.enable_amp(True, dtype=flow.float16)
        g.set_grad_scaler(object())
    with pytest.raises(TypeError, match="expected a GradScaler"):
        _train(bad, 0)
    _, g = _train(lambda g: g.config.enable_amp(True, dtype=flow.float16), 1)
    with pytest.raises(RuntimeError, match="before the first call"):
        g.set_grad_scaler(GradScalerState())


def test_flow_amp_grad_scalers_in_a_graph():
    def with_scaler(scaler):
        def setup(g):
            g.config.enable_amp(True, dtype=flow.float16)
            g.set_grad_scaler(scaler)
        return setup
    # OneFlow's GradScaler: its fields become the graph's dynamic scale
    _, g = _train(with_scaler(flow.amp.GradScaler(init_scale=8.0, growth_interval=2)), 3)
    state = g.state_dict()["_grad_scaler"]
    assert state["dynamic"] and state["scale"] == 16.0 and state["growth_tracker"] == 1
    # StaticGradScaler: the same steps as a dynamic scale that never changes, scale kept
    static, g = _train(with_scaler(flow.amp.StaticGradScaler(128.0)), 4)
    dynamic, _ = _train(with_scaler(GradScalerState(128.0, growth_interval=10 ** 9)), 4)
    assert static == dynamic
    assert g.state_dict()["_grad_scaler"]["scale"] == 128.0
    assert not g.state_dict()["_grad_scaler"]["dynamic"]
    # ... and it skips nothing: an overflowing static scale reaches the parameters
    _, g = _train(with_scaler(flow.amp.StaticGradScaler(2.0 ** 40)), 1)
    assert not np.isfinite(g.model.weight.numpy()).all()
    with pytest.raises(ValueError, match="scale_factor must > 0"):
        flow.amp.StaticGradScaler(0.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        flow.amp.GradScaler(growth_factor=2.0, backoff_factor=0.25)
