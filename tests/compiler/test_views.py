"""Which view ops the compiler lets alias their input (``job/views.py``), on hand-built
Jobs: aliased when no in-place write can tell a view from a copy, with control edges that keep
readers through a view ahead of a later write of its base; copies otherwise."""
import pytest

from actorflow.compiler import CompileOptions, compile_job
from actorflow.job.views import alias_views
from actorflow.framework import dtype as dt
from actorflow.job.job import BlobDesc, Job, OpConf

F32 = dt.float32


def d(*shape):
    return BlobDesc(tuple(shape), F32)


def var(name, *shape):
    return OpConf(name, "variable", [], {"name": name, "kind": "buffer"}, [d(*shape)])


def op(name, op_type, inputs, attrs, *outs, ctrl=()):
    return OpConf(name, op_type, list(inputs), dict(attrs), list(outs), ctrl_inputs=list(ctrl))


def job_of(*ops) -> Job:
    j = Job("views", list(ops))
    j.verify()
    return j


def aliased(job):
    return alias_views(job, job.topological_order())


def write_after_view(reader_ctrl=()):
    """w (4, 6); t = w.T; r = relu(t); w := x (assign, after t as the tracer orders it)."""
    return job_of(
        var("w", 4, 6), var("x", 4, 6),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("a", "assign", ["w/0", "x/0"], {}, ctrl=["t"]),
        op("r", "relu", ["t/0"], {}, d(6, 4), ctrl=reader_ctrl),
        op("out", "output", ["r/0"], {"index": 0, "path": "r"}, d(6, 4)))


def test_views_without_writers_alias_and_chain():
    job = job_of(
        var("w", 4, 6),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("n", "narrow", ["t/0"], {"dim": 0, "start": 1, "length": 3}, d(3, 4)),
        op("r1", "reshape", ["w/0"], {"shape": (24,)}, d(24)),
        op("s", "split", ["r1/0"], {"dim": 0, "sizes": (10, 14)}, d(10), d(14)),
        op("e", "expand", ["s/0"], {"shape": (2, 10)}, d(2, 10)),
        op("y", "relu", ["n/0"], {}, d(3, 4)))
    names, ctrl = aliased(job)
    assert names == {"t", "n", "r1", "s", "e"} and ctrl == []


def test_reshape_that_needs_a_copy_stays_a_kernel():
    job = job_of(
        var("w", 4, 6),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("flat", "reshape", ["t/0"], {"shape": (24,)}, d(24)),     # strided: copies
        op("same", "reshape", ["t/0"], {"shape": (6, 2, 2)}, d(6, 2, 2)),  # still a view
        op("y", "relu", ["flat/0"], {}, d(24)), op("z", "relu", ["same/0"], {}, d(6, 2, 2)))
    names, _ = aliased(job)
    assert names == {"t", "same"}
    plan = compile_job(job, CompileOptions(fold_views=False))
    assert plan.task_by_op("flat").kind == "normal" and plan.task_by_op("t").kind == "view"
    # folded: no view tasks; the kernels read w's register through the view steps
    plan = compile_job(job)
    assert {t.op_name for t in plan.tasks} >= {"flat", "y", "z"}
    assert not {"t", "same"} & {t.op_name for t in plan.tasks}
    w = plan.task_by_op("w").produced_regsts["out"]
    flat, z = plan.task_by_op("flat"), plan.task_by_op("z")
    assert flat.input_blobs == [(w, 0)] and z.input_blobs == [(w, 0)]
    assert flat.input_views == {0: [("transpose", {"perm": (1, 0)}, 0, (6, 4))]}
    assert z.input_views == {0: [("transpose", {"perm": (1, 0)}, 0, (6, 4)),
                                 ("reshape", {"shape": (6, 2, 2)}, 0, (6, 2, 2))]}


def test_reader_through_a_view_is_ordered_before_the_write_of_its_base():
    job = write_after_view()
    names, ctrl = aliased(job)
    assert names == {"t"} and ctrl == [("r", "a")]
    plan = compile_job(job)
    t, r, a = (plan.task_by_op(n) for n in ("t", "r", "a"))
    assert t.kind == "view"
    rt = plan.regst_descs[t.produced_regsts["out"]]
    assert rt.alias_of == plan.task_by_op("w").produced_regsts["out"] and rt.mem == [[None]]
    assert r.produced_regsts["out"] in a.consumed_regsts["in_ctrl"]
    # no control edges without the pass
    plan = compile_job(job, CompileOptions(alias_views=False))
    assert plan.task_by_op("t").kind == "normal"
    a = plan.task_by_op("a")
    assert plan.task_by_op("r").produced_regsts["out"] not in a.consumed_regsts["in_ctrl"]


def test_a_reader_after_the_write_keeps_the_copy():
    # the copy holds w's values before the assign; an alias read after it would see new ones
    names, ctrl = aliased(write_after_view(reader_ctrl=["a"]))
    assert names == set() and ctrl == []


def test_a_view_unordered_with_a_write_of_its_base_keeps_the_copy():
    job = job_of(
        var("w", 4, 6), var("x", 4, 6),
        op("a", "assign", ["w/0", "x/0"], {}),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),   # no edge to or from a
        op("r", "relu", ["t/0"], {}, d(6, 4)))
    assert aliased(job) == (set(), [])


def test_a_view_after_the_write_aliases_without_edges():
    job = job_of(
        var("w", 4, 6), var("x", 4, 6),
        op("a", "assign", ["w/0", "x/0"], {}),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4), ctrl=["a"]),
        op("r", "relu", ["t/0"], {}, d(6, 4)))
    assert aliased(job) == ({"t"}, [])


def test_a_view_written_in_place_keeps_the_copy():
    # writing through an alias would change w, which the copy leaves alone
    job = job_of(
        var("w", 4, 6), var("x", 6, 4),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("a", "assign", ["t/0", "x/0"], {}),
        op("r", "relu", ["w/0"], {}, d(4, 6)))
    assert aliased(job) == (set(), [])


def test_dropping_a_chain_head_keeps_the_views_of_its_copy():
    # t's chain reads after the write: t copies; n, a view of that copy (never written), aliases
    job = job_of(
        var("w", 4, 6), var("x", 4, 6),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("a", "assign", ["w/0", "x/0"], {}, ctrl=["t"]),
        op("n", "narrow", ["t/0"], {"dim": 0, "start": 1, "length": 3}, d(3, 4)),
        op("r", "relu", ["n/0"], {}, d(3, 4), ctrl=["a"]))
    assert aliased(job) == ({"n"}, [])


def test_views_waited_for_or_read_by_other_than_kernels_keep_their_task():
    job = job_of(
        var("w", 4, 6), var("x", 4, 6),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4)),
        op("a", "assign", ["w/0", "x/0"], {}, ctrl=["t"]),          # waits for t
        op("r", "relu", ["t/0"], {}, d(6, 4)),
        op("n", "narrow", ["r/0"], {"dim": 0, "start": 0, "length": 2}, d(2, 4)),
        op("out", "output", ["n/0"], {"index": 0, "path": "n"}, d(2, 4)))   # not a kernel
    plan = compile_job(job)
    assert plan.task_by_op("t").kind == "view" and plan.task_by_op("n").kind == "view"
    assert plan.task_by_op("r").input_views == {}


def test_a_view_that_waits_for_an_op_keeps_its_task_and_the_wait():
    """Folded into its reader, a view's control inputs would be lost (the reader would not
    wait for what the view waited for): such a view keeps its task, and its edge."""
    job = job_of(
        var("w", 4, 6),
        op("s", "relu", ["w/0"], {}, d(4, 6)),
        op("t", "transpose", ["w/0"], {"perm": (1, 0)}, d(6, 4), ctrl=["s"]),
        op("r", "relu", ["t/0"], {}, d(6, 4)),
        op("out", "output", ["r/0"], {"index": 0, "path": "r"}, d(6, 4)),
        op("out2", "output", ["s/0"], {"index": 1, "path": "s"}, d(4, 6)))
    plan = compile_job(job)
    t = plan.task_by_op("t")
    assert t.kind == "view" and plan.task_by_op("r").input_views == {}
    s_out = plan.task_by_op("s").produced_regsts["out"]
    assert s_out in t.consumed_regsts.get("in_ctrl", [])


@pytest.mark.parametrize("reader_ctrl", [(), ("a",)])
def test_plans_round_trip_through_json(reader_ctrl):
    from actorflow.compiler import Plan
    job = write_after_view(reader_ctrl)
    job.ops += [op("u", "transpose", ["x/0"], {"perm": (1, 0)}, d(6, 4)),
                op("s", "relu", ["u/0"], {}, d(6, 4))]       # u folds into s
    plan = compile_job(job)
    assert plan.task_by_op("s").input_views
    assert Plan.from_json(plan.to_json()) == plan


def test_a_buffer_written_through_a_view_in_build_keeps_aliases_right(monkeypatch):
    """A traced write through a view (``b[:, 0].mul_(3)``: getitem, mul, setitem into b's old
    value, copy, assign b) after a reader through another view of b (``b.t()``): the transpose
    aliases b with its readers ordered before the assign, and the values on the actor runtime
    are eager's, step after step."""
    import numpy as np

    import actorflow as flow
    import actorflow.nn as nn

    monkeypatch.setenv("ACTORFLOW_RUN_GRAPH_BY_VM", "0")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", flow.arange(24, dtype=flow.float32).reshape(4, 6))

        def forward(self, x):
            r = self.b.t() * x                  # read through a view before the write
            with flow.no_grad():
                self.b[:, 0].mul_(3)            # a write through another view
            return r + self.b.t()[0]            # a view of the written base

    m_g, m_e = M(), M()

    class G(nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m_g

        def build(self, x):
            return self.m(x)

    g = G()
    for step in range(3):
        x = flow.full((6, 4), float(step + 1))
        np.testing.assert_array_equal(g(x).numpy(), m_e(x).numpy())
    np.testing.assert_array_equal(m_g.b.numpy(), m_e.b.numpy())
    job = g.full_job
    assert any(o.op_type == "setitem" for o in job.ops)
    names, ctrl = alias_views(job, job.topological_order())
    var = next(o for o in job.ops if o.op_type == "variable" and o.attrs["name"].endswith("b"))
    first_t = next(o for o in job.ops if o.op_type == "transpose" and o.inputs == [var.out(0)])
    assign = next(o for o in job.ops if o.op_type == "assign")
    assert first_t.name in names
    assert any(w == assign.name for _, w in ctrl)   # its reader runs before b is assigned
