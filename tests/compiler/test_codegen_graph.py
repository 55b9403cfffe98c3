"""nn.Graph with generated C kernels: same training losses with and without generation, the
Plan showing what was generated, the fallback without a compiler, the environment switch and
the on-disk cache."""
from __future__ import annotations

import importlib
import json
import warnings

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.plan import Plan

cbuild = importlib.import_module("actorflow.compiler.codegen.build")  # the module (not build())

pytestmark = pytest.mark.timeout(300)


def _train(steps: int = 4):
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 4))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((64, 16)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 64))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            h = self.model(a)
            loss = F.cross_entropy(h * 0.5 + 0.25, b)
            loss.backward()
            return loss

    g = Train()
    losses = [float(g(x, y).numpy()) for _ in range(steps)]
    return g, losses


@pytest.fixture(autouse=True)
def _generation_on(monkeypatch):
    monkeypatch.setenv(codegen.ENV, "1")


def test_same_losses_with_and_without_generation(monkeypatch):
    g, on = _train()
    assert g.plan.codegen["status"] == "built"
    generated = [t for t in g.plan.tasks if t.generated]
    assert generated, "the MLP step should have generated kernels"
    monkeypatch.setenv(codegen.ENV, "0")
    g2, off = _train()
    assert not any(t.generated for t in g2.plan.tasks) and g2.plan.codegen == {}
    # scalar mul/add and the bias adds are the same IEEE operations as the
    # NumPy kernels; tanh is glibc's against NumPy's (a few float32 ulps), so losses agree to
    # float32 rounding: 1e-5 relative
    np.testing.assert_allclose(on, off, rtol=1e-5)


def test_plan_shows_generated_tasks_in_json_and_dot():
    g, _ = _train(1)
    plan = g.plan
    t = next(t for t in plan.tasks if t.generated)
    entry = plan.codegen["tasks"][t.op_name]
    assert entry["symbol"] == t.generated and entry["ops"]
    assert f"C {t.generated}" in plan.to_dot()
    back = Plan.from_json(plan.to_json())
    assert back == plan and back.task(t.task_id).generated == t.generated
    # a Plan read back from JSON builds (from the cache) and runs its generated kernels
    assert t.task_id in codegen.kernels_of(back)


def test_no_compiler_falls_back_to_numpy_with_one_warning(monkeypatch, tmp_path):
    _, want = _train(2)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(cbuild, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g, got = _train(2)
    ours = [w for w in caught if issubclass(w.category, codegen.CodegenWarning)]
    assert len(ours) == 1 and "no C compiler" in str(ours[0].message)
    assert g.plan.codegen["status"] == "fallback"
    assert not codegen.kernels_of(g.plan)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_compile_error_falls_back_with_a_warning(monkeypatch):
    monkeypatch.setattr(cbuild, "_warned", set())
    with pytest.warns(codegen.CodegenWarning, match="failed with status"):
        assert cbuild.build("this is not C;\n") is None


def test_second_build_hits_the_disk_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(cbuild.CACHE_VAR, str(tmp_path))
    source = "int af_cache_probe(void) { return 42; }\n"
    builds, hits = cbuild.stats["builds"], cbuild.stats["cache_hits"]
    lib = cbuild.build(source)
    assert lib.af_cache_probe() == 42 and cbuild.stats["builds"] == builds + 1
    assert [p.name for p in tmp_path.iterdir()] == [lib._name.rsplit("/", 1)[1]]
    cbuild._loaded.clear()  # as a new process would: only the file is left
    lib2 = cbuild.build(source)
    assert lib2.af_cache_probe() == 42
    assert cbuild.stats["builds"] == builds + 1 and cbuild.stats["cache_hits"] == hits + 1


def test_trace_names_each_fused_task_with_its_ops_and_kernel(tmp_path):
    g, _ = _train(1)
    x = flow.tensor(np.random.default_rng(1).standard_normal((64, 16)).astype(np.float32))
    y = flow.tensor(np.zeros(64, np.int64))
    with flow.profiler.profile() as prof:
        g(x, y).numpy()
    events = json.loads(open(prof.export_chrome_trace(str(tmp_path / "t.json"))).read())
    events = events["traceEvents"] if isinstance(events, dict) else events
    by_name = {e["name"]: e for e in events if e.get("ph") == "X" and e.get("cat") != "vm"}
    fused = [t for t in g.plan.tasks if t.attrs.get("ops")]
    assert fused and any(t.generated for t in fused)
    for t in fused:
        args = by_name[t.op_name]["args"]
        assert args["ops"] == " ".join(t.attrs["ops"])
        assert args.get("generated", "") == t.generated
    # the JSON Plan holds each fused task's ops and kernel too
    tasks = {d["op_name"]: d for d in json.loads(g.plan.to_json())["tasks"]}
    for t in fused:
        assert tasks[t.op_name]["generated"] == t.generated
