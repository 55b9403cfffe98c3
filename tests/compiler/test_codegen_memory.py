"""The memory of a graph with generated kernels: kernels that write an output over an input
(``in_place`` pairs: ``CRow.in_place`` of row ops, any same-shape input of an elementwise
loop) give the out-of-place NumPy results, and the memory plan puts such outputs over inputs
the task reads last, so a training step needs less register memory with generation on and
trains to the same losses (1e-5 relative, as tests/compiler/test_codegen_graph.py)."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.codegen import rows
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from tests.compiler.test_codegen_rows import DTYPES, SPECIAL, _close, _ln_attrs

pytestmark = pytest.mark.timeout(300)

ULPS = 4


def _specials(a: np.ndarray) -> np.ndarray:
    flat = a.reshape(-1)
    k = min(len(SPECIAL), flat.size // 3)
    flat[:k] = np.array(SPECIAL[:k], np.float64).astype(a.dtype)
    return a


def _row_calls(shape, npd, rng):
    """(op, attrs, inputs, output shapes) of every row op with in-place pairs."""
    x = _specials((rng.standard_normal(shape) * 3).astype(npd))
    g = (rng.standard_normal(shape)).astype(npd)
    n, lead = shape[-1], shape[:-1] + (1,)
    w = rng.standard_normal(n).astype(npd)
    mean = x.mean(-1, keepdims=True, dtype=np.float64).astype(npd)
    inv = rng.uniform(0.5, 2, lead).astype(npd)
    y = np.abs(rng.standard_normal(shape)).astype(npd)
    return [
        ("layer_norm", _ln_attrs(1, shape, True, True), [x, w, w], [shape, lead, lead]),
        ("layer_norm_grad", _ln_attrs(1, shape, True, False), [g, x, mean, inv, w],
         [shape, (n,), (n,)]),
        ("gelu", {"approximate": "none", "save_cdf": True}, [x], [shape, shape]),
        ("gelu", {"approximate": "tanh", "save_cdf": False}, [x], [shape]),
        ("gelu_grad", {"approximate": "none"}, [g, x, y], [shape]),
        ("gelu_grad", {"approximate": "tanh"}, [g, x], [shape]),
        ("gelu_with_grad", {"approximate": "none"}, [g, x], [shape, shape]),
        ("gelu_with_grad", {"approximate": "tanh"}, [g, x], [shape, shape]),
        ("softmax", {"dim": -1}, [x], [shape]),
        ("log_softmax", {"dim": -1}, [x], [shape]),
        ("softmax_grad", {"dim": -1}, [g, y], [shape]),
        ("log_softmax_grad", {"dim": -1}, [g, y], [shape]),
    ]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", [(1, 1), (5, 33), (2, 3, 130)])
def test_row_kernels_in_place_give_the_out_of_place_numpy_results(dtype, shape):
    d = DTYPES[dtype]
    calls = _row_calls(shape, d.np, np.random.default_rng(shape[-1]))
    kerns = rows.row_kernels_for([(op, attrs, [(a.shape, d) for a in ins], [(s, d) for s in outs])
                                  for op, attrs, ins, outs in calls])
    for (op, attrs, ins, outs), kern in zip(calls, kerns):
        assert kern is not None and kern.in_place, f"{op} should compute in place"
        ref = [np.full(s, 7, d.np) for s in outs]
        registry.get(op).kernel_cpu(ins, ref, attrs)
        for j, a in kern.in_place:
            mine = [x.copy() for x in ins]
            got = [np.full(s, 7, d.np) for s in outs]
            got[j] = mine[a].reshape(outs[j])  # the output over the input
            kern(mine, got, attrs)
            assert np.shares_memory(got[j], mine[a])
            for k, (g, r) in enumerate(zip(got, ref)):
                _close(g, r, shape[-1] + ULPS, f"{op} out {k} over input {a}")


def test_elementwise_kernel_in_place_pairs_skip_broadcast_and_other_dtypes():
    f32 = dt.float32
    prog = {"ops": ["add", "mul"], "op_attrs": [{}, {}], "args": [[0, 1], [3, 2]],
            "shapes": [(6, 40), (6, 40)], "dtypes": [f32, f32], "exports": [1],
            "parts": ["add", "mul"]}
    metas = [((6, 40), f32), ((40,), f32), ((6, 40), f32)]
    (kern,) = codegen.kernels_for([(prog, metas)])
    assert kern is not None
    assert sorted(kern.in_place) == [(0, 0), (0, 2)]  # input 1 is broadcast
    rng = np.random.default_rng(0)
    ins = [_specials(rng.standard_normal(s).astype(np.float32)) for s, _ in metas]
    ref = (ins[0] + ins[1]) * ins[2]
    for _, a in kern.in_place:
        mine = [x.copy() for x in ins]
        kern(mine, [mine[a]], {})
        np.testing.assert_array_equal(mine[a], ref)


def _train(steps: int = 4):
    flow.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(32)
            self.up = nn.Linear(32, 64)
            self.down = nn.Linear(64, 32)

        def forward(self, h):
            return h + self.down(F.gelu(self.up(self.ln(h))))

    model = nn.Sequential(nn.Linear(16, 32), Block(), Block(), nn.LayerNorm(32),
                          nn.Linear(32, 4))
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((8, 16, 16)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 128))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            loss = F.cross_entropy(self.model(a).reshape(-1, 4), b)
            loss.backward()
            return loss

    g = Train()
    return g, [float(g(x, y).numpy()) for _ in range(steps)]


def _start(plan, rid):
    mem = plan.regst_descs[rid].mem
    return tuple(mem[0][0]) if mem and mem[0] and mem[0][0] and mem[0][0][0] is not None \
        else None


def _over_input(plan) -> list:
    """Tasks whose output register starts where one of their inputs' registers does."""
    found = []
    for t in plan.tasks:
        rid = t.produced_regsts.get("out")
        if rid is None or t.kind != "normal" or not _start(plan, rid):
            continue
        if any(_start(plan, i) == _start(plan, rid) for i, _ in t.input_blobs):
            found.append(t)
    return found


def test_graph_with_generation_writes_in_place_and_needs_less_memory(monkeypatch):
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train()
    mem_on = g.plan.memory
    assert mem_on["in_place"] > 0
    over = _over_input(g.plan)
    assert over and all(t.generated for t in over)
    monkeypatch.setenv(codegen.ENV, "0")
    g2, off = _train()
    mem_off = g2.plan.memory
    assert mem_off["in_place"] == 0 and not _over_input(g2.plan)
    assert mem_on["bytes_with_sharing"] < mem_off["bytes_with_sharing"]
    np.testing.assert_allclose(on, off, rtol=1e-5)
    both = {"with_codegen": mem_on["bytes_with_sharing"],
            "without_codegen": mem_off["bytes_with_sharing"]}
    assert g.register_memory() == both and g2.register_memory() == both


def test_generation_recomputes_gelu_instead_of_keeping_its_values(monkeypatch):
    """gelu's saved Phi(x) is recomputed by gelu_grad's row kernel, and gelu's output, which
    the weight gradient reads, by a clone in the backward; the Job the graph shows is
    unchanged."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, _ = _train(1)
    tasks = [t for t in g.plan.tasks if t.op_type in ("gelu", "gelu_grad", "gelu_with_grad")]
    clones = [t for t in tasks if t.op_name.endswith("-recompute")]
    assert len(clones) == 2 and all(t.generated for t in tasks)
    # each clone computes its gelu's gradient too (rewrite 3 of codegen/recompute.py)
    assert {t.op_type for t in clones} == {"gelu_with_grad"}
    assert not any(t.op_type == "gelu_grad" for t in g.plan.tasks)
    assert all(len(t.input_blobs) == 2 for t in clones)
    job_gelus = [o for o in g.full_job.ops if o.op_type == "gelu"]
    assert len(job_gelus) == 2 and all(len(o.outputs) == 2 for o in job_gelus)
    for t in tasks:
        if t.op_type == "gelu":
            out = g.plan.regst_descs[t.produced_regsts["out"]]
            assert len(out.blobs) == 1  # y only


def _train_gelu_into_layer_norm(steps: int = 3):
    """A graph whose backward reads gelu's output h before gelu's gradient input exists: a
    layer norm's gradient reads its input h, and gelu_grad's dout is that gradient."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 24), nn.LayerNorm(24), nn.Linear(24, 3))
    opt = flow.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(1)
    x = flow.tensor(rng.standard_normal((16, 12)).astype(np.float32))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a):
            h = F.gelu(self.model[0](a))
            loss = (self.model[2](self.model[1](h)) ** 2).mean()
            loss.backward()
            return loss

    g = Train()
    return g, [float(g(x).numpy()) for _ in range(steps)]


def test_a_recomputed_gelu_read_before_its_gradient_input_exists_stays_apart(monkeypatch):
    """The fused gelu_with_grad would have to run before h's backward readers and after the
    gradient those readers produce: no place for it, so the clone and gelu_grad stay two
    tasks, and the graph trains to the losses without generation."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train_gelu_into_layer_norm()
    types = [t.op_type for t in g.plan.tasks]
    clones = [t for t in g.plan.tasks if t.op_name.endswith("-recompute")]
    assert [t.op_type for t in clones] == ["gelu"] and "gelu_grad" in types
    assert "gelu_with_grad" not in types
    monkeypatch.setenv(codegen.ENV, "0")
    _, off = _train_gelu_into_layer_norm()
    np.testing.assert_allclose(on, off, rtol=1e-5)


def test_gelu_with_grad_trains_to_the_losses_without_generation(monkeypatch):
    """The rewrite's graph (tests above: both gelus fused with their gradients) against the
    NumPy kernels, 1e-5 relative as the module docstring says."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train(4)
    assert sum(t.op_type == "gelu_with_grad" for t in g.plan.tasks) == 2
    monkeypatch.setenv(codegen.ENV, "0")
    g2, off = _train(4)
    assert not any(t.op_type == "gelu_with_grad" for t in g2.plan.tasks)
    np.testing.assert_allclose(on, off, rtol=1e-5)
