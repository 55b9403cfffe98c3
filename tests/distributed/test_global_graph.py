"""The distributed nn.Graph (global parameters and inputs, 1-D and 2-D SBP): the rank scripts
``graph_*.py`` beside this file, run through ``mpiexec`` on 2 (and 4) ranks, on both graph
executors; and what a world of one process shows of it (placement and sbp in the Job, the
boxing report, the collective schedule of the Plan)."""
from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.compiler.task_id import describe_thread, thread_id_of
from actorflow.dispatch.lazy_global import boxing_report
from tests.distributed.test_distributed import needs_mpi, run_ranks


def _ok(code: int, out: str, n: int) -> None:
    assert code == 0, out
    for r in range(n):
        assert f"OK rank {r}" in out, out


@needs_mpi
@pytest.mark.timeout(180)
def test_seed_program_equals_one_process():
    code, _, out = run_ranks(2, "graph_seed.py", timeout=170)
    _ok(code, out, 2)
    code1, _, out1 = run_ranks(1, "graph_seed.py", timeout=170)
    _ok(code1, out1, 1)

    def values(text: str) -> np.ndarray:
        # (the ranks' lines may interleave: find the list, not the line)
        return np.array(ast.literal_eval(re.search(r"VALUES (\[\[.*?\]\])", text).group(1)))

    # same inputs and parameters (creation ops don't depend on the world size); the split
    # matmul sums its partial products in another order
    np.testing.assert_allclose(values(out), values(out1), rtol=1e-6, atol=1e-6)


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n, executor", [(2, "actors"), (2, "vm"), (4, "actors")])
def test_data_parallel_graph_trains_like_one_process(n, executor):
    code, _, out = run_ranks(n, "graph_dp.py", executor, timeout=290)
    _ok(code, out, n)


@needs_mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_gradient_accumulation_with_collectives_per_micro_batch(executor):
    # the comm thread's schedule: the micro-batch collectives once per micro-batch, then the
    # gradients' all-reduces once per iteration
    code, _, out = run_ranks(2, "graph_dp_acc.py", executor, timeout=190)
    _ok(code, out, 2)


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_tensor_parallel_graph_equals_unsplit_model(executor):
    code, _, out = run_ranks(2, "graph_tp.py", executor, timeout=290)
    _ok(code, out, 2)


@needs_mpi
@pytest.mark.timeout(300)
def test_tensor_parallel_graph_on_four_ranks():
    code, _, out = run_ranks(4, "graph_tp.py", timeout=290)
    _ok(code, out, 4)


_REMOTE = ("RemoteRankError: boxing P->B (all-reduce) shard () float64 abandoned: rank 1 "
           "failed: embedding (op emb-embedding-0): kernel failed [in module emb]")


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_kernel_error_on_one_rank_raises_on_every_rank(executor):
    """A kernel error on rank 1 only (graph_failures.py caught): rank 1 raises its KernelError,
    rank 0, waiting in the graph's all-reduce, raises a RemoteRankError naming rank 1, the op
    and its module within seconds (the comm timeout is 60 s); the graph refuses later calls
    on both ranks, a new graph runs, and both ranks exit 0 (nothing hangs at exit)."""
    code, seconds, out = run_ranks(2, "graph_failures.py", "caught", executor, timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code == 0, out
    assert re.search(r"rank 1 raised after [\d.]+ s: KernelError: embedding \(op "
                     r"emb-embedding-0\): kernel failed \[in module emb\].*index 9 is out of "
                     r"range", out), out
    m = re.search(r"rank 0 raised after ([\d.]+) s: (.*)", out)
    assert m and m.group(2).startswith(_REMOTE), out
    assert float(m.group(1)) < 5, out
    for r in range(2):
        assert f"rank {r} second call: KernelError: graph call refused: call 1 failed" in out, out
        assert f"rank {r} finished: 8.0" in out, out
    assert "UNREACHABLE" not in out and "did not complete" not in out, out
    assert seconds < 50, (seconds, out)


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode, failed", [("raise", "rank 1"), ("raise0", "rank 0")])
def test_an_uncaught_graph_error_ends_the_job(mode, failed):
    """The rank that lets its error go uncaught (rank 1's own, or rank 0's RemoteRankError)
    ends the job non-zero through the exception hook, printing the error with its rank."""
    code, seconds, out = run_ranks(2, "graph_failures.py", mode, "actors", timeout=100,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code != 0, out
    assert f"[actorflow {failed}] uncaught exception" in out, out
    assert "index 9 is out of range" in out, out
    if mode == "raise0":
        assert _REMOTE in out, out
    assert not re.search(r"rank \d finished", out) and "UNREACHABLE" not in out, out
    assert seconds < 40, (seconds, out)


# ---- a world of one process: the same code paths, no transfer -----------------------------------

class _Linear(nn.Module):
    def __init__(self, pl):
        super().__init__()
        flow.manual_seed(1)
        self.weight = nn.Parameter(flow.randn(4, 3, placement=pl, sbp=flow.sbp.broadcast))

    def forward(self, x):
        return flow.matmul(x, self.weight)


class _Train(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.9))

    def build(self, x):
        loss = self.model(x).sum()
        loss.backward()
        return loss


@pytest.mark.timeout(60)
def test_one_process_global_graph_trains_like_eager():
    pl = flow.placement("cpu", ranks=[0])
    x = np.random.default_rng(0).standard_normal((5, 4))
    eager, graph = _Linear(pl).to(flow.float64), _Linear(pl).to(flow.float64)
    opt = flow.optim.SGD(eager.parameters(), lr=0.5, momentum=0.9)
    g = _Train(graph)
    xg = flow.tensor(x, placement=pl, sbp=flow.sbp.split(0))
    for _ in range(3):
        loss = eager(xg).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out = g(xg)
        assert out.is_global and out.placement == pl
        np.testing.assert_allclose(out.numpy(), loss.numpy(), rtol=1e-12)
    np.testing.assert_allclose(graph.weight.numpy(), eager.weight.numpy(), rtol=1e-12)
    assert graph.weight.is_global
    # the Job records placement and sbp; the gradient is all-reduced before the update
    job = g.full_job
    mm = [o for o in g.forward_job.ops if o.op_type == "matmul"][0]
    assert mm.tags["global"]["in"] == ("S(0)", "B") and mm.tags["global"]["placement"] == "cpu:0"
    report = boxing_report(job)
    assert any(line.startswith("model.weight grad: P -> B all-reduce") for line in report), report
    assert "cpu:0" in g.forward_job.to_dot()
    assert "@ cpu:0 S(0),B->S(0)" in g.forward_job.summary(), g.forward_job.summary()
    # the collective runs on its own thread, numbered
    coll = [t for t in g.plan.tasks if t.kind == "collective"]
    assert coll and [t.attrs["collective_seq"] for t in coll] == list(range(len(coll)))
    assert {describe_thread(thread_id_of(t.task_id)) for t in coll} == {"rank0/cpu:0/comm"}


@pytest.mark.timeout(60)
def test_debug_1_prints_each_boxing(capsys):
    pl = flow.placement("cpu", ranks=[0])
    g = _Train(_Linear(pl))
    g.debug(1)
    g(flow.randn(5, 4, placement=pl, sbp=flow.sbp.split(0)))
    out = capsys.readouterr().out
    assert "model.weight grad: P -> B all-reduce, 48 B" in out, out


class _TwoReductions(nn.Graph):
    def build(self, x, w, y):
        slow = flow.matmul(x, w)             # S(1) x S(0) -> P: a long kernel first
        a = slow.to_global(sbp=flow.sbp.broadcast)   # collective 0, waits for the matmul
        b = y.to_global(sbp=flow.sbp.broadcast)      # collective 1, ready at once
        return a, b


@pytest.mark.timeout(120)
def test_collectives_act_in_job_order_every_iteration():
    pl = flow.placement("cpu", ranks=[0])
    rng = np.random.default_rng(2)
    xv, wv, yv = rng.standard_normal((300, 600)), rng.standard_normal((600, 600)), \
        rng.standard_normal((4,))
    x = flow.tensor(xv, placement=pl, sbp=flow.sbp.split(1))
    w = flow.tensor(wv, placement=pl, sbp=flow.sbp.split(0))
    y = flow.tensor(yv, placement=pl, sbp=flow.sbp.partial_sum)
    g = _TwoReductions()
    g(x, w, y)
    flow.synchronize()
    coll = sorted((t for t in g.plan.tasks if t.kind == "collective"),
                  key=lambda t: t.attrs["collective_seq"])
    assert [t.attrs["collective_seq"] for t in coll] == [0, 1]
    with flow.profiler.profile() as prof:
        outs = [g(x, w, y) for _ in range(3)]
        flow.synchronize()
    for a, b in outs:
        np.testing.assert_allclose(a.numpy(), xv @ wv, rtol=1e-10)
        np.testing.assert_allclose(b.numpy(), yv)
    acts = [e for e in prof.acts() if e["kind"] == "collective"]
    assert len(acts) == 6, acts
    first, second = coll[0].op_name, coll[1].op_name
    # strictly alternating 0, 1, 0, 1, ...: the ready collective 1 waited for collective 0
    assert [e["op"] for e in sorted(acts, key=lambda e: e["start"])] == [first, second] * 3
    assert {e["thread"] for e in acts} == {"actorflow-rank0/cpu:0/comm"}


@needs_mpi
@pytest.mark.timeout(120)
def test_random_ops_agree_across_ranks():
    code, _, out = run_ranks(2, "graph_random.py", timeout=110)
    _ok(code, out, 2)


@pytest.mark.timeout(60)
def test_input_sbp_is_part_of_the_signature():
    pl = flow.placement("cpu", ranks=[0])
    m = _Linear(pl)

    class Fwd(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m

        def build(self, x):
            return self.model(x)

    g = Fwd()
    xv = np.random.default_rng(4).standard_normal((5, 4)).astype(np.float32)
    a = g(flow.tensor(xv, placement=pl, sbp=flow.sbp.split(0)))
    b = g(flow.tensor(xv, placement=pl, sbp=flow.sbp.broadcast))
    assert g._compiles == 2 and "device" in g.compile_log[-1], g.compile_log
    assert a.sbp == (flow.sbp.split(0),) and b.sbp == (flow.sbp.broadcast,)
    want = xv @ m.weight.numpy()
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-5)
    assert "weight" in repr(g)


@pytest.mark.timeout(60)
def test_errors_name_the_op():
    pl = flow.placement("cpu", ranks=[0])
    m = _Linear(pl)
    local_w = nn.Parameter(flow.randn(3, 2))

    class Mixed(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = m

        def build(self, x):
            return flow.matmul(self.model(x), local_w)

    with pytest.raises(ValueError, match="matmul: mixes a local tensor that requires grad"):
        Mixed()(flow.randn(5, 4, placement=pl, sbp=flow.sbp.split(0)))


@needs_mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("n, executor", [(2, "actors"), (2, "vm"), (4, "actors"), (4, "vm")])
def test_2d_data_x_tensor_parallel_graph_trains_like_one_process(n, executor):
    # 4 ranks: a 2x2 placement (oversubscribed here: few steps, tiny sizes); 2: hierarchy (1, 2)
    code, _, out = run_ranks(n, "graph_nd.py", executor, timeout=290)
    _ok(code, out, n)


@pytest.mark.timeout(60)
def test_nd_placement_in_one_process_graph_trains_like_eager():
    pl = flow.placement("cpu", ranks=[[0]])
    sbp = (flow.sbp.split(0), flow.sbp.broadcast)
    x = np.random.default_rng(6).standard_normal((5, 4))
    pl1 = flow.placement("cpu", ranks=[0])
    eager = _Linear(pl1).to(flow.float64).to_global(placement=pl, sbp=(flow.sbp.broadcast,) * 2)
    graph = _Linear(pl1).to(flow.float64).to_global(placement=pl, sbp=(flow.sbp.broadcast,) * 2)
    opt = flow.optim.SGD(eager.parameters(), lr=0.5, momentum=0.9)
    g = _Train(graph)
    xg = flow.tensor(x, placement=pl, sbp=sbp)
    for _ in range(3):
        loss = eager(xg).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        out = g(xg)
        assert out.is_global and out.placement == pl and len(out.sbp) == 2, out
        np.testing.assert_allclose(out.numpy(), loss.numpy(), rtol=1e-12)
    np.testing.assert_allclose(graph.weight.numpy(), eager.weight.numpy(), rtol=1e-12)
    assert graph.weight.sbp == (flow.sbp.broadcast,) * 2
    # the Job shows the 2-D placement and sbp, also after a JSON round trip
    mm = [o for o in g.forward_job.ops if o.op_type == "matmul"][0]
    assert mm.tags["global"]["in"] == ("(S(0), B)", "(B, B)"), mm.tags["global"]
    assert mm.tags["global"]["placement"] == "cpu:[[0]]"
    assert "@ cpu:[[0]] (S(0), B),(B, B)->(S(0), B)" in g.forward_job.summary()
    back = type(g.full_job).from_json(g.full_job.to_json())
    tags = [o.tags.get("global") for o in g.full_job.ops]
    assert [o.tags.get("global") for o in back.ops] == tags
    # the weight gradient is (P, B): partial over groups of one, which hold its value already
    assert not boxing_report(g.full_job)
    # to_global inside build takes one sbp per hierarchy axis
    y = flow.tensor(x, placement=pl, sbp=(flow.sbp.broadcast,) * 2)

    class ToSplit(nn.Graph):
        def build(self, y):
            return y.to_global(sbp=(flow.sbp.broadcast, flow.sbp.split(1)))

    z = ToSplit()(y)
    assert z.sbp == (flow.sbp.broadcast, flow.sbp.split(1))
    np.testing.assert_array_equal(z.numpy(), x)


@pytest.mark.timeout(60)
def test_moves_to_nd_and_wrong_sbp_counts_naming_them():
    pl, pl2 = flow.placement("cpu", ranks=[0]), flow.placement("cpu", ranks=[[0]])
    bb = (flow.sbp.broadcast, flow.sbp.broadcast)

    class Fwd(nn.Graph):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def build(self, x):
            return self.fn(x)

    x = flow.randn(5, 4, placement=pl, sbp=flow.sbp.split(0))
    # a move to an n-d placement sharing rank 0: a local copy, no transfer
    g = Fwd(lambda x: x.to_global(placement=pl2, sbp=(flow.sbp.broadcast, flow.sbp.split(1))))
    y = g(x)
    assert y.placement == pl2 and y.sbp == (flow.sbp.broadcast, flow.sbp.split(1))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    kinds = [o.op_type for o in g.forward_job.ops]
    assert "copy" in kinds and not any(k.startswith("pipe_") for k in kinds), kinds
    with pytest.raises(ValueError, match=r"to_global with 1 sbp on placement .* hierarchy "
                                         r"\(1, 1\): give one sbp per hierarchy axis"):
        Fwd(lambda x: x.to_global(placement=pl2, sbp=flow.sbp.broadcast))(x)
    with pytest.raises(ValueError, match=r"to_global with 2 sbp on placement .* hierarchy "
                                         r"\(1,\): give one sbp per hierarchy axis"):
        Fwd(lambda x: x.to_global(sbp=bb))(x)


@pytest.mark.timeout(60)
def test_partial_max_in_a_graph_as_eagerly():
    pl = flow.placement("cpu", ranks=[0])
    xv = np.random.default_rng(5).standard_normal((6, 3))
    x = flow.tensor(xv, placement=pl, sbp=flow.sbp.split(0))

    class Max(nn.Graph):
        def build(self, x):
            m = x.amax(dim=0)
            return m, m.to_global(sbp=flow.sbp.broadcast)

    g = Max()
    a, b = g(x)
    assert a.sbp == x.amax(dim=0).sbp == (flow.sbp.partial_max,) and b.sbp == (flow.sbp.broadcast,)
    np.testing.assert_array_equal(a.numpy(), xv.max(0))
    np.testing.assert_array_equal(b.numpy(), xv.max(0))
    box = [o for o in g.forward_job.ops if "boxing" in o.tags]
    assert [o.op_type for o in box] == ["boxing_pm_to_b"]
    assert box[0].tags["global"]["in"] == ("M",) and box[0].attrs["group"].startswith("graph")
    assert [t.op_name for t in g.plan.tasks if t.kind == "collective"] == [box[0].name]


@needs_mpi
@pytest.mark.timeout(120)
def test_ranks_leave_together_with_graph_calls_in_flight():
    # without the exit barrier one rank waited in the last call's all-gather for a peer that
    # had finalized, about one run in three: "runtime shutdown timed out" after 2 s
    for _ in range(3):
        code, secs, out = run_ranks(2, "graph_exit_in_flight.py", timeout=100)
        assert code == 0, out
        assert out.count("LEAVING rank") == 2 and "timed out" not in out, out
