"""The compiler: Job -> Plan (tasks, regst descs, task ids, memory plan, JSON and DOT)."""
import numpy as np
import pytest

import actorflow as flow
import actorflow.nn.functional as F
from actorflow.compiler import (CompileOptions, Plan, compile_job, decode_task_id,
                                encode_task_id, thread_id_of)
from actorflow.compiler import codegen
from actorflow.compiler.task_id import describe_thread
from actorflow.dispatch.lazy import LazyInterpreter


def mlp_job(train: bool = True):
    flow.manual_seed(0)
    w1 = flow.nn.Parameter(flow.randn(16, 8))
    w2 = flow.nn.Parameter(flow.randn(4, 16))
    x = flow.randn(5, 8)
    names = {id(w1): ("w1", "parameter", w1), id(w2): ("w2", "parameter", w2)}
    b = LazyInterpreter("mlp", names)
    with b:
        xi = b.add_input(0, "x", x)
        h = F.relu(F.linear(xi, w1))
        y = F.linear(h, w2).sum()
        if train:
            y.backward()
        b.add_output(0, "y", y)
    return b.job, b.bindings, x


def test_task_id_round_trip_and_thread_id():
    tid = encode_task_id(3, "cpu", 1, "io", 77)
    t = decode_task_id(tid)
    assert (t.rank, t.device_type, t.device_index, t.stream, t.index) == (3, "cpu", 1, "io", 77)
    assert thread_id_of(tid) == thread_id_of(encode_task_id(3, "cpu", 1, "io", 5))
    assert thread_id_of(tid) != thread_id_of(encode_task_id(3, "cpu", 1, "compute", 77))
    assert describe_thread(thread_id_of(tid)) == "rank3/cpu:1/io"
    with pytest.raises(ValueError, match="stream"):
        encode_task_id(0, "cpu", 0, "nope", 0)
    with pytest.raises(ValueError, match="bits"):
        encode_task_id(0, "cpu", 0, "compute", 1 << 30)


def test_plan_structure():
    job, _, _ = mlp_job()
    plan = compile_job(job)
    kinds = [t.kind for t in plan.tasks]
    for k in ("wait_and_send_ids", "compute_start", "input", "variable", "normal", "output",
              "iteration_end", "callback_notify"):
        assert k in kinds, k
    # one task per op of the job, plus the four system ticks; by default view ops read only by
    # kernels are folded into them (job/views.py) and have none
    assert len(compile_job(job, CompileOptions(fold_views=False)).tasks) == len(job.ops) + 4
    folded = {o.name for o in job.ops} - {t.op_name for t in plan.tasks}
    assert folded and all(o.op_type in ("reshape", "expand") for o in job.ops if o.name in folded)
    # the only source task is WaitAndSendIds: it consumes nothing but control regsts
    assert [t.kind for t in plan.source_tasks] == ["wait_and_send_ids"]
    streams = {t.kind: decode_task_id(t.task_id).stream for t in plan.tasks}
    assert streams["wait_and_send_ids"] == "source" and streams["input"] == "io"
    assert streams["normal"] == "compute"
    # every regst desc's producer and consumers agree with the tasks' maps
    for r in plan.regst_descs.values():
        assert plan.task(r.producer).produced_regsts["out"] == r.regst_desc_id
        for c in r.consumers:
            consumed = [rid for rids in plan.task(c).consumed_regsts.values() for rid in rids]
            assert r.regst_desc_id in consumed
    # an update op (none here) / the ctrl edges of the job appear as in_ctrl
    linear = plan.task_by_op(next(o.name for o in job.ops if o.op_type == "linear"))
    assert set(linear.consumed_regsts) == {"in_0", "in_1"}
    assert linear.input_blobs[0][1] == 0


def test_ctrl_edges_become_in_ctrl():
    w = flow.nn.Parameter(flow.ones(3))
    b = LazyInterpreter("upd", {id(w): ("w", "parameter", w)})
    with b:
        x = b.add_input(0, "x", flow.ones(3))
        y = (x * w).sum()
        with flow.no_grad():
            w.add_(1.0)  # an in-place write to state: an assign after the read
        b.add_output(0, "y", y)
    plan = compile_job(b.job)
    assign = next(t for t in plan.tasks if t.op_type == "assign")
    assert "in_ctrl" in assign.consumed_regsts


def test_plan_json_round_trip_and_dot():
    job, _, _ = mlp_job()
    plan = compile_job(job)
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert again.to_json() == plan.to_json()
    dot = plan.to_dot()
    assert dot.startswith("digraph")
    assert dot.count("subgraph cluster_thread_") == len(plan.thread_ids) == 3
    assert "rank0/cpu:0/compute" in dot


def test_plan_tasks_state_rank_device_stream_thread():
    """Each task of the JSON and DOT says where it runs, without decoding its id; a Plan of a
    distributed graph says whose rank's it is."""
    import json

    job, _, _ = mlp_job()
    plan = compile_job(job, CompileOptions(rank=3, world_size=4))
    d = json.loads(plan.to_json())
    assert (d["rank"], d["world_size"]) == (3, 4)
    streams = set()
    for t in d["tasks"]:
        parts = decode_task_id(t["task_id"])
        assert t["rank"] == 3 == parts.rank
        assert t["device"] == "cpu:0"
        assert t["stream"] == parts.stream
        assert t["thread_id"] == thread_id_of(t["task_id"])
        assert t["thread"] == f"rank3/cpu:0/{parts.stream}"
        streams.add(t["stream"])
    assert {"compute", "source", "io"} <= streams
    again = Plan.from_json(plan.to_json())
    assert again == plan and (again.rank, again.world_size) == (3, 4)
    assert plan.summary().startswith(f"Plan {job.name} of rank 3 (one of 4 ranks' Plans)")
    assert "of rank 3" in plan.to_dot()
    assert "rank 3 cpu:0 source" in plan.to_dot()
    # a local Plan keeps its plain title
    assert compile_job(job).summary().startswith(f"Plan {job.name}: ")
    # a stated place that disagrees with the task id is refused
    d["tasks"][0]["stream"] = "comm" if d["tasks"][0]["stream"] != "comm" else "io"
    with pytest.raises(ValueError, match="task id says"):
        Plan.from_json(json.dumps(d))


def test_memory_plan_shares_and_reports():
    job, _, _ = mlp_job()
    shared = compile_job(job).memory
    alone = compile_job(job, CompileOptions(share_memory=False)).memory
    assert shared["bytes_with_sharing"] < shared["bytes_without_sharing"]
    assert alone["bytes_with_sharing"] == alone["bytes_without_sharing"]
    assert shared["bytes_without_sharing"] == alone["bytes_without_sharing"]


def test_memory_sharing_respects_lifetimes():
    """Two registers share bytes only if every task touching one (producer, consumers) is an
    ancestor of the other's producer, or the other is written over it in place."""
    job, _, _ = mlp_job()
    plan = compile_job(job)
    in_place = codegen.in_place_of(plan)
    tasks = {t.task_id: t for t in plan.tasks}
    parents = {t.task_id: {plan.regst_descs[r].producer for rs in t.consumed_regsts.values()
                           for r in rs} for t in plan.tasks}

    def ancestors(tid, seen=None):
        seen = set() if seen is None else seen
        for p in parents[tid]:
            if p not in seen:
                seen.add(p)
                ancestors(p, seen)
        return seen

    spans: dict = {}  # block -> [(start, end, regst)]
    for r in plan.regst_descs.values():
        for reg in r.mem:
            placed = [(w, d) for w, (_, d) in zip(reg, r.blobs) if w is not None]
            if placed:
                block, lo = placed[0][0]
                hi = max(off + d.nbytes() for (_, off), d in placed)
                spans.setdefault(block, []).append((lo, hi, r))

    # tasks reading a register's data (a control consumer only waits for it: memory.py)
    data_readers = {rid: set() for rid in plan.regst_descs}
    for t in plan.tasks:
        for rid, _ in t.input_blobs:
            data_readers[rid].add(t.task_id)

    def before(a, b):  # every task touching a's bytes acts before b's producer
        anc = ancestors(b.producer)
        return a.producer in anc and all(c in anc for c in data_readers[a.regst_desc_id])

    shared = 0
    for items in spans.values():
        for i, (lo, hi, a) in enumerate(items):
            for lo2, hi2, b in items[i + 1:]:
                if lo < hi2 and lo2 < hi:  # overlapping bytes
                    shared += 1
                    # or one's generated kernel writes it over the other, read last (in place)
                    ok = before(a, b) or before(b, a) or any(
                        x.producer in in_place and lo == lo2 and all(
                            c in ancestors(x.producer) or c == x.producer
                            for c in data_readers[y.regst_desc_id])
                        for x, y in ((a, b), (b, a)))
                    assert ok, (a, b)
    assert shared, "expected some sharing in an MLP training job"
    assert all(tasks[r.producer].kind != "variable" or all(m is None for reg in r.mem
                                                          for m in reg)
               for r in plan.regst_descs.values())


def test_regst_num_option():
    job, _, _ = mlp_job()
    plan = compile_job(job, CompileOptions(regst_num=2, input_regst_num=3))
    for r in plan.regst_descs.values():
        kind = plan.task(r.producer).kind
        if kind == "input":
            assert r.regst_num == 3
        elif kind == "normal":
            assert r.regst_num == 2
        elif kind == "variable":
            assert r.regst_num == 1


def test_values_independent_of_memory_sharing():
    from actorflow.runtime.executor import RuntimeExecutor

    job, bindings, x = mlp_job(train=False)
    outs = []
    for share in (True, False):
        ex = RuntimeExecutor(job, CompileOptions(share_memory=share))
        outs.append(ex.run([x.numpy()], bindings)[0])
        ex.close()
    assert np.array_equal(outs[0], outs[1])
