"""ZeRO in the distributed nn.Graph (``config.enable_zero``): the rank scripts
``graph_zero.py`` (stages 1, 2) and ``graph_zero3.py`` (stage 3) on 2 ranks (both executors)
and 4 ranks, ``graph_zero3_levels.py`` (stage 3's ``shard_restore_level`` 0, 1, 2) on 2; in
one process the config's errors and that a graph without several ranks updates as without
ZeRO."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from tests.distributed.test_distributed import needs_mpi, run_ranks


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n, executor, short", [(2, "actors", ""), (2, "vm", ""),
                                                (4, "actors", "short")])
def test_zero_graph_equals_data_parallel(n, executor, short):
    args = [executor] + ([short] if short else [])
    code, _, out = run_ranks(n, "graph_zero.py", *args, timeout=290)
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(120)
def test_zero_stage3_restore_levels():
    # (4 ranks pass too, in about twice the time: run by hand)
    code, _, out = run_ranks(2, "graph_zero3_levels.py", timeout=110)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(200)
def test_zero_with_a_grad_scaler_skips_steps_as_without_zero():
    # stages 1 and 2 write the gathered shard back into the broadcast parameter: on a step
    # the scaler skips, that write-back must run (it is the identity), not be refused
    code, _, out = run_ranks(2, "graph_zero_scaler.py", timeout=190)
    assert code == 0, out
    for r in range(2):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n, executor", [(2, "actors"), (2, "vm"), (4, "actors")])
def test_zero_stage3_equals_data_parallel(n, executor):
    code, _, out = run_ranks(n, "graph_zero3.py", executor, timeout=290)
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out
    # the memory plan's parameter bytes per rank: stage 3 about 1/n of stages 0-2
    line = next(x for x in out.splitlines() if x.startswith("BYTES adam"))
    params = [int(v) for k, v in zip(line.split(), line.split()[1:]) if k == "params"]
    assert params[0] == params[1] == params[2] and params[3] < params[0] / (n - 0.5), line


def test_enable_zero_config_errors():
    cfg = nn.Graph().config
    cfg.enable_zero(True, stage=3)
    assert cfg.zero_stage == 3
    with pytest.raises(ValueError, match="stage must be 1, 2 or 3"):
        cfg.enable_zero(True, stage=4)
    with pytest.raises(ValueError, match="shard_min_size"):
        cfg.enable_zero(True, stage=1, shard_min_size=0)
    cfg.enable_zero(True, stage=1, shard_min_size=4)
    assert cfg.zero_stage == 1 and cfg.zero_shard_min_size == 4
    assert "zero_stage=1" in repr(cfg)
    cfg.enable_zero(False)
    assert cfg.zero_stage == 0
    assert cfg.zero_shard_restore_level == 1  # OneFlow's default
    for level in (0, 1, 2):
        cfg.enable_zero(True, stage=3, shard_restore_level=level)
        assert cfg.zero_shard_restore_level == level
        assert f"zero_shard_restore_level={level}" in repr(cfg)
    for bad in (3, -1, True, 1.0, "1"):
        with pytest.raises(ValueError, match="shard_restore_level must be 0 .* got"):
            cfg.enable_zero(True, stage=3, shard_restore_level=bad)
    assert cfg.zero_shard_restore_level == 2 and cfg.zero_stage == 3  # unchanged


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_in_a_local_graph_changes_nothing(stage):
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((5, 3)))

    def train(zero: bool):
        flow.manual_seed(1)
        m = nn.Linear(3, 2).to(flow.float64)
        opt = flow.optim.Adam(m.parameters(), lr=0.1)

        class G(nn.Graph):
            def __init__(self):
                super().__init__()
                self.m = m
                self.add_optimizer(opt)
                if zero:
                    self.config.enable_zero(True, stage=stage, shard_min_size=1)

            def build(self, x):
                loss = (self.m(x) ** 2).sum()
                loss.backward()
                return loss

        g = G()
        losses = [float(g(x).numpy()) for _ in range(3)]
        return losses, [p.numpy() for p in m.parameters()], opt

    ref_l, ref_p, _ = train(False)
    z_l, z_p, opt = train(True)
    np.testing.assert_array_equal(z_l, ref_l)
    for a, b in zip(z_p, ref_p):
        np.testing.assert_array_equal(a, b)
    assert all(not s["exp_avg"].is_global for s in opt.state.values())
    assert all(not p.is_global for p in opt.param_groups[0]["params"])
