"""``flow.distributed.check_plans(make, world_size=N)`` in one process (no mpiexec): every
rank's Plan compiled under ``simulate_rank`` - data/tensor parallel, pipelines, ZeRO, a 2x2
placement agree; programs that differ by rank are reported naming the ops on each side; a
rank that fails to compile is named; nothing communicates or runs; the world, the random
state and graph numbering are back afterwards. The summaries equal those of a real 2-rank
run (``graph_check_sim.py``)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.distributed import check_plans, simulate_plans, simulate_rank
from tests.distributed import plan_factories as pf
from tests.distributed.test_distributed import needs_mpi, run_ranks

GOOD = {
    "dp": (pf.dp, 2), "tp": (pf.tp, 2), "pipe": (pf.pipe, 2),
    "pipe_set_stage": (functools.partial(pf.pipe, "set_stage"), 2),
    "pipe_acc": (functools.partial(pf.pipe, acc=2), 2),
    "pipe4_acc": (functools.partial(pf.pipe, "set_stage", acc=2, n=4), 4),
    "zero1": (functools.partial(pf.zero, 1, adam=False), 2),
    "zero2": (functools.partial(pf.zero, 2), 2), "nd": (pf.nd, 4),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(GOOD))
def test_every_rank_compiles_and_the_plans_agree(case, monkeypatch):
    make, n = GOOD[case]
    ran = []
    real_apply = EagerInterpreter.apply

    def spy(self, op, *a, **k):   # a boxing or transfer kernel would be communication
        if op.collective or op.transfer:
            ran.append(op.name)
        return real_apply(self, op, *a, **k)

    def no_runtime(*a, **k):
        raise AssertionError("the runtime started")

    monkeypatch.setattr(EagerInterpreter, "apply", spy)
    monkeypatch.setattr("actorflow.runtime.executor.Runtime", no_runtime)
    summaries, failures = simulate_plans(make, n)
    assert failures == [] and ran == [], (failures, ran)
    assert [s["rank"] for s in summaries] == list(range(n))
    assert flow.distributed.compare_plans(summaries) == []
    assert check_plans(make, world_size=n) == []
    coll = [s["collectives"] for s in summaries]
    kinds = {c["op_type"] for cs in coll for c in cs}
    if case == "dp":   # the gradients' all-reduces, with their bytes
        w = [c for c in coll[1] if c["reason"] == "model.0.weight grad"]
        assert len(w) == 1 and w[0]["bytes"] == 8 * 6 * 4 and w[0]["shape"] == (8, 6), coll[1]
    elif case == "tp":  # the Megatron all-reduce of the partial output
        assert coll[0][0]["op_type"] == "boxing_p_to_b" and coll[0][0]["shape"] == (5, 3)
    elif case == "pipe4_acc":  # each stage all-reduces its gradients over its own two ranks
        assert [{c["ranks"] for c in cs} for cs in coll] == [{(0, 1)}] * 2 + [{(2, 3)}] * 2
        assert coll[0][1]["shape"] == (7, 6) and coll[2][1]["shape"] == (3, 7), coll
        # a stage's first rank sends a micro-batch to each rank of the other stage
        assert sorted(t["peer"] for t in summaries[0]["transfers"] if t["kind"] == "send") \
            == [2, 3]
    elif case.startswith("pipe"):  # no collective: one send and one recv each way
        acc = 2 if case == "pipe_acc" else 1
        assert coll == [[], []]
        for s in summaries:
            got = sorted((t["kind"], t["peer"], t["bytes"]) for t in s["transfers"])
            assert got == [("recv", 1 - s["rank"], 8 // acc * 7 * 8),
                           ("send", 1 - s["rank"], 8 // acc * 7 * 8)], got
    elif case == "zero2":  # reduce-scattered gradients, all-gathered updated shards
        assert {"boxing_p_to_s", "boxing_s_to_b"} <= kinds, kinds
    elif case == "zero1":
        assert {"boxing_p_to_b", "boxing_s_to_b"} <= kinds and "boxing_p_to_s" not in kinds
    elif case == "nd":  # each collective on the ranks along one axis of [[0, 1], [2, 3]]
        comms = [{c["ranks"] for c in cs} for cs in coll]
        assert comms[0] <= {(0, 1), (0, 2)} and comms[3] <= {(2, 3), (1, 3)}, comms
        assert (0, 1) in comms[0] and (2, 3) in comms[3], comms


@pytest.mark.timeout(60)
def test_each_rank_traces_its_own_shards():
    shapes = {}
    for r in range(2):
        with simulate_rank(r, 2):
            assert flow.env.get_rank() == r and flow.env.get_world_size() == 2
            g, args = pf.tp()
            w = g.model[0].weight
            assert w.to_local().is_meta and w.sbp == (pf.S0,), w.to_local()
            c, _ = g._compiled_for(args, {})
            var = {o.attrs["name"]: o for o in c.full_job.ops if o.op_type == "variable"}
            shapes[r] = tuple(var["model.0.weight"].outputs[0].shape)
    assert shapes == {0: (5, 6), 1: (4, 6)}, shapes   # 9 rows over 2 ranks


@pytest.mark.timeout(120)
def test_programs_that_differ_by_rank_are_named():
    # rank 1 gathers and re-splits its output: an all-gather rank 0 never issues
    problems = check_plans(functools.partial(pf.dp, extra_on=1), world_size=2)
    assert problems[0].startswith("collective #0: rank 0 issues boxing_p_to_b 'boxing_p_to_b-"), \
        problems
    assert "but rank 1 issues boxing_s_to_b 'boxing_s_to_b-" in problems[0], problems
    assert "they differ in op_type, shape, in_dim" in problems[0], problems
    assert "rank 0 has only 4 collectives (it would wait forever)" in problems[-1], problems
    # rank 1 boxes the partial output to split(0), rank 0 to broadcast
    problems = check_plans(functools.partial(pf.tp, out_sbp_on=(1, pf.S0)), world_size=2)
    assert problems[0].startswith("collective #0: rank 0 issues boxing_p_to_b"), problems
    assert "rank 1 issues boxing_p_to_s" in problems[0] and "op_type, out_dim" in problems[0]
    # the stages disagree on the micro-batches: rank 1 receives half of what rank 0 sends
    problems = check_plans(functools.partial(pf.pipe, acc_on=(1, 2)), world_size=2)
    assert len(problems) == 2, problems
    assert problems[0].startswith("transfer #0 rank 0 -> 1: send 'model-pipe_send-"), problems
    assert "(key 0, shape None, 448 B) meets recv 'model-pipe_recv-" in problems[0], problems
    assert "(key 0, shape (4, 7), 224 B) (they differ in bytes)" in problems[0], problems


@pytest.mark.timeout(60)
def test_collectives_on_sub_communicators_and_hangs_across_them():
    def c(op, ranks, shape=(2,)):
        return {"op": op, "op_type": "boxing_p_to_b", "group": "g", "shape": shape,
                "in_dim": None, "out_dim": None, "ranks": ranks, "bytes": 8, "reason": None}

    def s(r, coll):
        return {"rank": r, "job": "J", "collectives": coll, "transfers": []}

    a, b = (0, 1), (2, 3)
    # two groups, each consistent inside (shapes differ between the groups: fine)
    ok = [s(0, [c("x", a)]), s(1, [c("x", a)]), s(2, [c("y", b, (3,))]), s(3, [c("y", b, (3,))])]
    assert flow.distributed.compare_plans(ok) == []
    # ranks 0 and 1 each enter the other's second communicator first: a hang
    ac, bc = (0, 1), (0, 1, 2)
    bad = [s(0, [c("p", ac), c("q", bc)]), s(1, [c("q", bc), c("p", ac)]), s(2, [c("q", bc)])]
    problems = flow.distributed.compare_plans(bad)
    p, q = "boxing_p_to_b 'p' (group g, shape (2,), 8 B)", "boxing_p_to_b 'q' (group g, " \
        "shape (2,), 8 B)"
    assert problems == [
        f"collective #0: rank 0 issues {p} but rank 1 issues {q} (they differ in ranks; neither "
        f"completes: a hang)",
        f"collective #0: rank 2 issues {q} but rank 0 issues {p} (they differ in ranks; neither "
        f"completes: a hang)"], problems


class _Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 3)

    def forward(self, x):
        return self.fc(x)


def _bad_shape_on_rank_1():
    P = flow.placement("cpu", ranks=[0, 1])
    m = _Net(6 if flow.env.get_rank() == 0 else 5)
    m.to_global(placement=P, sbp=pf.B)
    x = flow.randn(4, 6, placement=P, sbp=pf.S0)
    t = flow.randn(4, 3, placement=P, sbp=pf.S0)
    return pf.Train(m, flow.optim.SGD(m.parameters(), lr=0.1), pf._mse), (x, t)


def _assert_world_is_back():
    assert flow.env.get_rank() == 0 and flow.env.get_world_size() == 1
    assert not flow.process.world.world().simulated
    np.testing.assert_array_equal((flow.ones(3) * 2).numpy(), [2, 2, 2])
    m = nn.Linear(3, 2)
    g = pf.Train(m, flow.optim.SGD(m.parameters(), lr=0.1), pf._mse)
    x, t = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    want = ((x @ m.weight.numpy().T + m.bias.numpy()) ** 2).sum()
    np.testing.assert_allclose(g(flow.tensor(x), flow.tensor(t)).numpy(), want, rtol=1e-5)
    g.close()


@pytest.mark.timeout(120)
def test_a_rank_that_fails_is_named_and_the_world_is_back():
    flow.manual_seed(7)
    want = flow.randn(4).numpy()
    flow.manual_seed(7)
    problems = check_plans(_bad_shape_on_rank_1, world_size=2)
    assert len(problems) >= 1 and problems[0].startswith(
        "rank 1 of 2: building or compiling its Plan failed: "), problems
    assert "(4, 6)" in problems[0] or "5" in problems[0], problems
    assert not any(p.startswith("rank 0 of 2") for p in problems), problems
    np.testing.assert_array_equal(flow.randn(4).numpy(), want)   # the random state is back
    _assert_world_is_back()

    def boom():
        raise KeyError("no model here")

    problems = check_plans(boom, world_size=3)
    assert problems == [f"rank {r} of 3: building or compiling its Plan failed: KeyError: "
                        f"'no model here'" for r in range(3)], problems
    assert check_plans(lambda: 5, world_size=2)[0].startswith(
        "rank 0 of 2: building or compiling its Plan failed: TypeError: check_plans: the "
        "factory returned int on rank 0"), "bad return"
    with pytest.raises(KeyError):
        with simulate_rank(1, 2):
            assert flow.env.get_rank() == 1
            boom()
    _assert_world_is_back()


@pytest.mark.timeout(60)
def test_simulate_rank_arguments_and_graph_objects():
    with pytest.raises(ValueError, match="rank 2 of world_size 2"):
        with simulate_rank(2, 2):
            pass
    with simulate_rank(0, 2):
        with pytest.raises(RuntimeError, match="already simulating"):
            with simulate_rank(1, 2):
                pass
        P = flow.placement("cpu", ranks=[0, 1])
        x = flow.ones(4, 2, placement=P, sbp=pf.S0)
        assert x.to_local().is_meta and x.to_local().shape == (2, 2)
        with pytest.raises(RuntimeError, match="no values while simulate_rank plays rank 0"):
            x.numpy()
    assert x.to_local().is_meta  # (a tensor made in the simulation stays without values)
    m = nn.Linear(3, 2)
    g = pf.Train(m, flow.optim.SGD(m.parameters(), lr=0.1), pf._mse)
    g(flow.ones(4, 3), flow.ones(4, 2))
    with pytest.raises(ValueError, match="pass a factory make"):
        check_plans(g, world_size=2)
    with pytest.raises(TypeError, match="takes an nn.Graph or a factory"):
        check_plans(3, world_size=2)
    # a factory without world_size in a one-process world would compare one rank with itself
    # (rank 1 would add an all-gather: a real mismatch this must not let pass)
    with pytest.raises(ValueError, match="needs world_size=.*or a run under mpiexec"):
        check_plans(functools.partial(pf.dp, extra_on=1))
    g.close()
    _assert_world_is_back()


@needs_mpi
@pytest.mark.timeout(240)
def test_one_process_summaries_equal_a_real_2_rank_run():
    code, _, out = run_ranks(2, "graph_check_sim.py", timeout=230)
    assert code == 0, out
    assert "OK rank 0" in out and "OK rank 1" in out, out
