"""``flow.distributed.check_plans``: the ranks' Plan summaries compared in one process
(``compare_plans``, with deliberately mismatched plans), a one-process Plan's summary, and the
check gathered over MPI on 2 ranks (``graph_check_plans.py``)."""
from __future__ import annotations

import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.distributed import compare_plans, plan_summary
from tests.distributed.test_distributed import needs_mpi, run_ranks


def _coll(op: str, op_type: str = "boxing_p_to_b", shape=(4, 3), group="graph0") -> dict:
    return {"op": op, "op_type": op_type, "group": group, "shape": shape, "in_dim": None,
            "out_dim": None, "ranks": (0, 1), "bytes": 4 * 3 * 4, "reason": None}


def _summary(rank: int, coll: list, transfers=(), job="Train") -> dict:
    return {"rank": rank, "job": job, "collectives": list(coll), "transfers": list(transfers)}


def _send(op, peer, key, shape=(2,), kind="send"):
    return {"op": op, "kind": kind, "peer": peer, "key": key, "shape": shape}


def test_matching_plans_have_no_problems():
    a = [_coll("p2b-1"), _coll("s2b-2", "boxing_s_to_b", (8,))]
    t0, t1 = [_send("send-1", 1, "act0")], [_send("recv-1", 0, "act0", kind="recv")]
    # op names may differ between ranks (each traces its own Job); what they do may not
    b = [dict(c, op=c["op"] + "x") for c in a]
    assert compare_plans([_summary(1, b, t1), _summary(0, a, t0)]) == []


def test_collectives_in_another_order_are_named():
    a = [_coll("p2b-1"), _coll("s2b-2", "boxing_s_to_b", (8,))]
    problems = compare_plans([_summary(0, a), _summary(1, a[::-1])])
    assert len(problems) == 2, problems
    assert problems[0] == ("collective #0: rank 0 issues boxing_p_to_b 'p2b-1' (group graph0, "
                           "shape (4, 3), 48 B) but rank 1 issues boxing_s_to_b 's2b-2' (group "
                           "graph0, shape (8,), 48 B) (they differ in op_type, shape)")


def test_a_missing_collective_or_another_group_is_named():
    a = [_coll("p2b-1"), _coll("p2b-2", shape=(5,))]
    problems = compare_plans([_summary(0, a), _summary(1, a[:1])])
    assert len(problems) == 1 and "rank 0 issues boxing_p_to_b 'p2b-2'" in problems[0], problems
    assert "rank 1 has only 1 collectives" in problems[0], problems
    problems = compare_plans([_summary(0, a), _summary(1, [a[0], dict(a[1], group="g9")])])
    assert problems and "differ in group" in problems[0], problems


def test_unmatched_sends_and_receives_are_named():
    s0 = _summary(0, [], [_send("send-a", 1, "x"), _send("send-b", 1, "y")])
    s1 = _summary(1, [], [_send("recv-a", 0, "x", kind="recv")])
    problems = compare_plans([s0, s1])
    assert problems == ["send 'send-b' (rank 0 -> 1, key y) has no matching recv on rank 1"]
    s1 = _summary(1, [], [_send("recv-a", 0, "y", kind="recv"),
                          _send("recv-b", 0, "x", kind="recv")])
    problems = compare_plans([s0, s1])
    assert len(problems) == 2 and "send 'send-a' (key x, shape (2,)) meets recv 'recv-a' " \
        "(key y" in problems[0], problems
    s1 = _summary(1, [], [_send("recv-z", 0, "z", kind="recv")])
    problems = compare_plans([_summary(0, []), s1])
    assert problems == ["recv 'recv-z' on rank 1 waits for rank 0, which sends nothing for it "
                        "(key z)"]


def test_different_graphs_are_named():
    problems = compare_plans([_summary(0, [], job="A"), _summary(1, [], job="B")])
    assert problems == ["the ranks compiled different graphs: ['A', 'B']"]


def test_one_process_plan_summary_and_world_size():
    model = nn.Linear(3, 2)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x):
            loss = self.model(x).sum()
            loss.backward()
            return loss

    g = Train()
    g(flow.ones(4, 3))
    s = plan_summary(g.plan)
    assert s["rank"] == 0 and s["collectives"] == [] and s["transfers"] == [], s
    assert flow.distributed.check_plans(g) == []
    with pytest.raises(ValueError, match="world_size=2 but 1 process.*mpiexec -n 2"):
        flow.distributed.check_plans(g, world_size=2)
    g.close()


@needs_mpi
@pytest.mark.timeout(120)
def test_check_plans_over_mpi():
    code, _, out = run_ranks(2, "graph_check_plans.py", timeout=110)
    assert code == 0, out
    assert "OK rank 0" in out and "OK rank 1" in out, out
