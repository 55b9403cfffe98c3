"""The pass manager verifies the Job after every pass: the first pass's result in full, later
ones incrementally (inference for the ops a pass added or changed and their readers), a pass
that changed nothing not at all, and its diff reports added / removed / changed ops."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
from actorflow.framework import dtype as dt
from actorflow.job.job import BlobDesc, Job
from actorflow.job.verify import JobError
from actorflow.passes import diff_jobs, run_passes


def traced_job() -> Job:
    class G(nn.Graph):
        def build(self, x):
            return (x.relu() + 1.0).exp()

    g = G()
    for name in ("constant_folding", "fuse_elementwise", "dead_op_elimination"):
        if g.config.pass_enabled(name):
            g.config.disable_pass(name)
    g(flow.randn(3, 4))
    return g.forward_job.copy()


def identity(job: Job) -> Job:
    return job


def first_of(job: Job, op_type: str):
    return next(o for o in job.ops if o.op_type == op_type)


@pytest.mark.timeout(10)
def test_a_later_pass_with_a_wrong_output_shape_is_caught():
    def bad(job):
        relu = first_of(job, "relu")
        relu.outputs = [BlobDesc((4, 3), relu.outputs[0].dtype)]
        return job

    with pytest.raises(JobError, match=r"after pass bad: .*relu.*records outputs"):
        run_passes(traced_job(), [("noop", identity), ("bad", bad)])


@pytest.mark.timeout(10)
def test_an_unchanged_reader_of_a_changed_op_is_checked_again():
    # the pass changes only the input op (a system op, not inference-checked); relu, which the
    # pass did not touch, now reads a float64 blob while recording float32 outputs
    def retype_input(job):
        inp = first_of(job, "input")
        inp.outputs = [BlobDesc(inp.outputs[0].shape, dt.float64)]
        return job

    with pytest.raises(JobError, match=r"after pass retype: .*relu"):
        run_passes(traced_job(), [("noop", identity), ("retype", retype_input)])


@pytest.mark.timeout(10)
def test_structure_is_checked_in_full_after_every_pass():
    def drop_relu(job):
        job.ops = [o for o in job.ops if o.op_type != "relu"]
        return job

    with pytest.raises(JobError, match=r"after pass drop: .*no earlier op produces"):
        run_passes(traced_job(), [("noop", identity), ("drop", drop_relu)])


@pytest.mark.timeout(10)
def test_a_pass_that_only_reorders_ops_is_checked_and_one_that_changes_nothing_is_not(
        monkeypatch):
    def reverse(job):
        job.ops = job.ops[::-1]
        return job

    with pytest.raises(JobError, match=r"after pass reverse: .*no earlier op produces"):
        run_passes(traced_job(), [("noop", identity), ("reverse", reverse)])
    import actorflow.passes.manager as manager

    calls = []
    real = manager.verify_job
    monkeypatch.setattr(manager, "verify_job", lambda job, recheck=None: (
        calls.append(recheck), real(job, recheck)))
    run_passes(traced_job(), [("first", identity), ("noop", identity), ("noop2", identity)])
    assert calls == [None]  # the first pass's result, in full; nothing after


@pytest.mark.timeout(10)
def test_diff_reports_added_removed_and_changed_ops():
    job = traced_job()

    def edit(j):
        j.ops = [o for o in j.ops if o.op_type != "exp"]
        add = first_of(j, "scalar_add")
        add.attrs = dict(add.attrs, scalar=2.0)
        out = first_of(j, "output")
        out.inputs = [add.out(0)]
        j.ops.insert(1, job.ops[0].copy(name="extra_input", attrs={"index": 9, "path": "x"}))
        return j

    out, log = run_passes(job, [("edit", edit)])
    entry = log[0]
    assert entry["added"] == ["extra_input"]
    assert entry["removed"] == [first_of(job, "exp").name]
    assert set(entry["changed"]) == {first_of(job, "scalar_add").name,
                                     first_of(job, "output").name}
    # array-valued attrs compare by value
    a, b = traced_job(), traced_job()
    for j, v in ((a, np.zeros(3)), (b, np.zeros(3))):
        first_of(j, "relu").attrs["value"] = v
    assert diff_jobs(a, b)["changed"] == []
    first_of(b, "relu").attrs["value"] = np.ones(3)
    assert diff_jobs(a, b)["changed"] == [first_of(b, "relu").name]


def test_build_pipeline_takes_the_optimizer_step_from_its_caller():
    """The optimizer step traces, so it lives in nn.graph: build_pipeline runs the factory its
    caller provides, refuses to guess one, and leaves the step out when it is disabled."""
    from types import SimpleNamespace

    from actorflow.nn.graph.config import GraphConfig
    from actorflow.passes import build_pipeline

    cfg = GraphConfig()
    ctx = SimpleNamespace(config=cfg, optimizers=[], bindings={}, namer=None, state_names={})
    with pytest.raises(ValueError, match="'optimizer' is provided by the caller"):
        build_pipeline(cfg, ctx)
    seen = []

    def step(job: Job) -> Job:
        return job

    names = [n for n, _ in build_pipeline(cfg, ctx, {"optimizer": lambda c: seen.append(c)
                                                     or step})]
    assert names[0] == "optimizer" and seen == [ctx]
    cfg.disable_pass("optimizer")
    assert "optimizer" not in [n for n, _ in build_pipeline(cfg, ctx)]
