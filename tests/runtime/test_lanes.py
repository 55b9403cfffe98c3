"""Two compute lanes (``compiler/lanes.py``, ``ACTORFLOW_GRAPH_COMPUTE_LANES=2``): kernel tasks
spread over two compute threads run independent branches at once, with the same bits as eager
training and as one lane."""
import pytest

import actorflow as flow
from actorflow.compiler import CompileOptions, compile_job
from actorflow.compiler import lanes as lanes_mod
from actorflow.compiler.lanes import assign_lanes
from actorflow.compiler.task_id import describe_thread
from tests.compiler.test_compiler import mlp_job
from tests.graph.test_equivalence import train_eager, train_graph
from tests.helpers import assert_graph_matches, numpy_kernels_under_adamw


def _lane_names(plan) -> dict:
    return {t.op_name: describe_thread(t.thread_id).rsplit("/", 1)[1] for t in plan.tasks}


def test_independent_weight_gradients_go_to_the_second_lane(monkeypatch):
    # a tiny Job: free hops between lanes, so that placement follows the graph's shape alone
    monkeypatch.setattr(lanes_mod, "HOP_S", 0.0)
    job, _, _ = mlp_job()
    order = job.topological_order()
    assert set(assign_lanes(job, order, 1).values()) == {0}
    lanes = assign_lanes(job, order, 2)
    by_op = {o.name: o for o in order}
    assert {lanes[n] for n, o in by_op.items() if o.op_type in ("variable", "input",
                                                                "output")} == {0}
    assert 1 in lanes.values()
    # the second lane holds work no task on the first lane waits for until the end
    second = [by_op[n] for n, k in lanes.items() if k == 1]
    assert all(o.tags.get("phase") == "backward" for o in second)
    plan = compile_job(job, CompileOptions(compute_lanes=2))
    streams = _lane_names(plan)
    on_second = [n for n, s in streams.items() if s == "compute_1"]
    assert on_second and all(by_op[n].tags.get("phase") == "backward" for n in on_second)
    with pytest.raises(ValueError, match="ACTORFLOW_GRAPH_COMPUTE_LANES"):
        compile_job(job, CompileOptions(compute_lanes=3))


def test_lanes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACTORFLOW_GRAPH_COMPUTE_LANES", "2")
    assert CompileOptions().compute_lanes == 2
    monkeypatch.setenv("ACTORFLOW_GRAPH_COMPUTE_LANES", "0")
    with pytest.raises(ValueError, match="ACTORFLOW_GRAPH_COMPUTE_LANES"):
        CompileOptions()
    monkeypatch.setenv("ACTORFLOW_GRAPH_ALIAS_VIEWS", "0")
    monkeypatch.delenv("ACTORFLOW_GRAPH_COMPUTE_LANES")
    assert CompileOptions().alias_views is False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["mlp", "cnn", "gpt"])
def test_two_lanes_train_bit_identically_to_eager(kind, monkeypatch):
    monkeypatch.setattr(lanes_mod, "HOP_S", 0.0)  # spread the tiny models' tasks too
    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "0")
    monkeypatch.setenv("ACTORFLOW_GRAPH_COMPUTE_LANES", "2")
    # the GPT trains with AdamW, the CNN with Adam, whose conv biases (feeding batch norms)
    # have a rounding-noise gradient Adam amplifies: both on the NumPy kernels (see the helper)
    if kind in ("gpt", "cnn"):
        numpy_kernels_under_adamw(monkeypatch)
    e_losses, e_state, _ = train_eager(kind)
    with flow.profiler.profile() as prof:
        g_losses, g_state, _, g = train_graph(kind)
    assert "compute_1" in set(_lane_names(g.plan).values())
    threads = {e["thread"] for e in prof.acts() if e["kind"] == "normal"}
    assert len(threads) == 2            # kernels really ran on two threads
    for a, b in zip(e_losses, g_losses):
        assert_graph_matches(b, a, "loss")
    for k in e_state:
        assert_graph_matches(g_state[k], e_state[k], k)
