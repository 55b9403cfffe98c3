"""Distributed Plans and profiles: each rank's Plan states its rank on every task, each rank
writes its own Chrome trace, and ``merge_traces`` joins them on one clock (issue #15)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.distributed.test_distributed import ROOT, needs_mpi, run_ranks


def _overlap_pairs(events: list) -> list:
    """Matching collective acts (op, iteration) of the two ranks' actor processes."""
    by = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] == "collective":
            by.setdefault((e["name"], e["args"]["iteration"]), {})[e["pid"]] = e
    return [v for v in by.values() if len(v) == 2]


@needs_mpi
@pytest.mark.timeout(240)
def test_two_ranks_traces_merge_into_one_timeline(tmp_path):
    code, _, out = run_ranks(2, "graph_trace.py", str(tmp_path), timeout=230)
    assert code == 0, out
    assert "OK rank 0" in out and "OK rank 1" in out, out
    files = [str(tmp_path / f"trace.rank{r}.json") for r in (0, 1)]
    merged_path = str(tmp_path / "merged.json")
    p = subprocess.run([sys.executable, "-m", "actorflow.profiler.merge", merged_path,
                        *files[::-1]], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stdout + p.stderr
    with open(merged_path) as f:
        merged = json.load(f)
    events = merged["traceEvents"]
    assert merged["otherData"]["ranks"] == [0, 1]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs[0] == "actorflow rank 0" and procs[2] == "actorflow rank 1", procs
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    for r in (0, 1):  # both ranks' actor threads are tracks; collectives on the comm thread
        assert f"actorflow-rank{r}/cpu:0/comm" in {v for (pid, _), v in threads.items()
                                                    if pid == 2 * r}, threads
    pairs = _overlap_pairs(events)
    assert len(pairs) >= 3, pairs
    # an all-reduce ends on a rank only after the other rank entered it: with the clocks
    # aligned the matching acts overlap (rank 1 started profiling 0.3 s later)
    slack = 2000.0  # us
    for v in pairs:
        a, b = v[0], v[2]
        assert a["ts"] <= b["ts"] + b["dur"] + slack and b["ts"] <= a["ts"] + a["dur"] + slack, v
    ids = [e["id"] for e in events if e["ph"] == "s"]
    assert len(ids) == len(set(ids))  # flow arrows of the two ranks stay apart


def test_merge_refuses_a_file_that_is_not_a_trace(tmp_path):
    from actorflow.profiler import merge_traces

    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(ValueError, match="x.json is not an actorflow profiler trace"):
        merge_traces([bad])


@needs_mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("executor", ["actors", "vm"])
def test_other_rank_names_the_failed_rank_and_op_long_before_the_timeout(executor):
    """A kernel error on rank 1 (graph_failures.py raise0): rank 0, waiting in the graph's
    all-reduce, gets rank 1's failure notice and raises, naming rank 1, the op and its module,
    well within a comm timeout it never reaches; uncaught, its exception hook ends the job."""
    code, seconds, out = run_ranks(2, "graph_failures.py", "raise0", executor, timeout=110,
                                   env={"ACTORFLOW_COMM_TIMEOUT": "60"})
    assert code != 0, out
    assert ("[actorflow rank 0] uncaught exception" in out and "RemoteRankError: boxing P->B "
            "(all-reduce) shard () float64 abandoned: rank 1 failed: embedding (op "
            "emb-embedding-0): kernel failed [in module emb]") in out, out
    assert "did not complete" not in out, out
    assert "finished" not in out, out
    assert seconds < 40, (seconds, out)
