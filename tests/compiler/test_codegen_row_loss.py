"""Row forms of cross_entropy and its backward (ops/loss_rows.py) against the NumPy kernels,
and a GPT-style loss (linear -> cross_entropy over (B*T, V)) training to the same losses in
nn.Graph with generated kernels on and off.

Cases: (N, C) and (C,) inputs in float32 / float64 / float16 / bfloat16, int64 and int32
targets, reductions none / sum / mean, with and without a class weight, label smoothing 0 and
0.1, ignore_index -100 (none, some or every target ignored) or a class, NaN and inf scores.
Tolerance: ``_close`` of test_codegen_rows (``4 * eps * n`` relative to the largest value,
one ulp of the storage dtype more), with ``n`` the row length plus the number of rows: the
row sums run in another order, the forward shifts each row by its own max where the NumPy
kernel may shift a batch of close values by one, and a mean or sum adds the row losses in
double where NumPy adds float32 pairwise. NaN and inf must sit at the same places."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.codegen import rows
from actorflow.framework import dtype as dt
from actorflow.ops import registry
from tests.compiler.test_codegen_rows import _close

pytestmark = pytest.mark.timeout(300)

ROW_OPS = ("cross_entropy", "cross_entropy_backward")  # the row forms checked here

FLOATS = {"float32": dt.float32, "float64": dt.float64, "float16": dt.float16,
          "bfloat16": dt.bfloat16}
INTS = {"int64": dt.int64, "int32": dt.int32}


def _case(shape, dtype, tdtype, red, weight, eps, ignore, special=False, seed=0):
    """(forward attrs, forward inputs, forward output metas, backward attrs, dout)."""
    rng = np.random.default_rng(seed)
    d = FLOATS[dtype]
    n_cls = shape[-1]
    x = (rng.standard_normal(shape) * 3).astype(d.np)
    pos = shape[:-1]
    y = rng.integers(0, n_cls, pos).astype(INTS[tdtype].np)
    ign = -100
    if ignore == "some" and y.size > 1:
        y.reshape(-1)[::3] = -100
    elif ignore == "all":
        y[...] = -100
    elif ignore == "class":
        ign = 1
    if special and x.ndim == 2 and shape[0] >= 4:
        x[0, 1] = np.nan
        x[1, 0] = np.inf
        x[2, :] = -np.inf
        x[3, 2] = -np.inf
    ins = [x, y]
    if weight:
        ins.append((rng.random(n_cls) + 0.5).astype(d.np))
    attrs = {"reduction": red, "ignore_index": ign, "label_smoothing": eps}
    loss_shape = pos if red == "none" else ()
    outs = [(loss_shape, d), (shape, d)]
    battrs = dict(attrs, needs=(True, False) + ((False,) if weight else ()))
    dout = (rng.standard_normal(loss_shape) + 1.5).astype(d.np)
    return attrs, ins, outs, battrs, dout


CASES = []
for red, weight, eps, ignore in itertools.product(("none", "sum", "mean"), (False, True),
                                                  (0.0, 0.1), ("none", "some", "class")):
    CASES.append(((64, 96), "float32", "int64", red, weight, eps, ignore, False))
    CASES.append(((7,), "float64", "int32", red, weight, eps, ignore, False))
for red, dtype in itertools.product(("none", "sum", "mean"), FLOATS):
    CASES.append(((33, 130), dtype, "int64", red, False, 0.0, "some", False))
    CASES.append(((1, 1), dtype, "int32", red, True, 0.1, "none", False))
CASES += [((16, 9), "float32", "int64", "none", w, e, "some", True)
          for w in (False, True) for e in (0.0, 0.1)]
CASES += [((8, 5), "float32", "int64", "mean", False, 0.0, "all", False),   # 0 / 0: NaN
          ((8, 5), "float64", "int64", "sum", True, 0.0, "all", False),
          ((1024, 256), "float32", "int64", "mean", False, 0.0, "none", False)]  # the GPT's


@pytest.fixture(scope="module")
def built():
    """Forward and backward kernels of every case, built as one library."""
    items, data = [], []
    for i, c in enumerate(CASES):
        attrs, ins, outs, battrs, dout = _case(*c, seed=i)
        d = FLOATS[c[1]]
        metas = [(a.shape, FLOATS.get(a.dtype.name) or INTS[a.dtype.name]) for a in ins]
        items.append(("cross_entropy", attrs, metas, outs))
        bins = [(dout.shape, d)] + metas[:1] + metas[1:] + [(c[0], d)]
        items.append(("cross_entropy_backward", battrs, bins, [(c[0], d)]))
        data.append((attrs, ins, outs, battrs, dout))
    kernels = rows.row_kernels_for(items)
    return [(data[i], kernels[2 * i], kernels[2 * i + 1]) for i in range(len(CASES))]


def _run(kern, op, ins, out_metas, attrs):
    got = [np.full(s, 7, d.np) for s, d in out_metas]
    ref = [np.full(s, 7, d.np) for s, d in out_metas]
    calls = kern.calls
    kern(ins, got, attrs)
    registry.get(op).kernel_cpu(ins, ref, attrs)
    assert kern.calls == calls + 1, f"{op}: ran the NumPy kernel"
    return got, ref


@pytest.mark.parametrize("i", range(len(CASES)), ids=[str(c) for c in CASES])
def test_cross_entropy_rows_match_numpy(i, built):
    (attrs, ins, outs, battrs, dout), fwd, bwd = built[i]
    shape = CASES[i][0]
    assert fwd is not None and bwd is not None, f"{CASES[i]}: no row kernel"
    tol_n = shape[-1] + (shape[0] if len(shape) == 2 else 1) + 4
    got, ref = _run(fwd, "cross_entropy", ins, outs, attrs)
    for name, g, r in zip(("loss", "prob"), got, ref):
        _close(g, r, tol_n, f"cross_entropy {name} {CASES[i]}")
    bins = [dout] + ins + [ref[1]]
    (gdx,), (rdx,) = _run(bwd, "cross_entropy_backward", bins, [(shape, outs[1][1])], battrs)
    # the gradient's terms (prob * g, g at the target) may cancel to rounding noise, and the
    # NumPy kernel rounds float16 / bfloat16 between its steps: errors are relative to g
    floor = float(np.max(np.abs(dout.astype(np.float64)), initial=0)) \
        * float(np.max(ins[2], initial=1) if len(ins) > 2 else 1)
    _close(gdx, rdx, tol_n, f"cross_entropy_backward {CASES[i]}", floor)
    # in place: dx written over the probabilities it reads
    prob = ref[1].copy()
    bwd(bins[:-1] + [prob], [prob], battrs)
    _close(prob, rdx, tol_n, f"cross_entropy_backward in place {CASES[i]}", floor)


def test_a_target_out_of_range_raises_the_kernels_error(built):
    (attrs, ins, outs, battrs, dout), fwd, bwd = built[0]
    y = ins[1].copy()
    for bad in (96, -1):
        y[5] = bad
        with pytest.raises(ValueError, match=f"target {bad} is out of bounds for 96 classes"):
            fwd([ins[0], y] + ins[2:], [np.empty(s, d.np) for s, d in outs], attrs)
        prob = np.full(ins[0].shape, 0.5, np.float32)
        before = prob.copy()
        with pytest.raises(ValueError, match="out of bounds"):  # in place: refused untouched
            bwd([dout, ins[0], y] + ins[2:] + [prob], [prob], battrs)
        assert np.array_equal(prob, before)
    assert fwd.refused == 2 and bwd.refused == 2


def test_calls_without_a_row_form():
    f32, i64 = dt.float32, dt.int64
    attrs = {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0}
    # class probabilities (a float target shaped as the input)
    assert rows.row_task("cross_entropy", attrs, [((4, 5), f32), ((4, 5), f32)],
                         [((), f32), ((4, 5), f32)]) is None
    # classes in dim 1 of a 3-D input
    assert rows.row_task("cross_entropy", attrs, [((4, 5, 3), f32), ((4, 3), i64)],
                         [((), f32), ((4, 5, 3), f32)]) is None
    assert rows.row_task("cross_entropy", attrs, [((4, 5), f32), ((4,), i64)],
                         [((), f32), ((4, 5), f32)]) is not None
    # the backward of a call whose target needs a gradient (class probabilities)
    assert rows.row_task("cross_entropy_backward", dict(attrs, needs=(True, True)),
                         [((), f32), ((4, 5), f32), ((4,), i64), ((4, 5), f32)],
                         [((4, 5), f32), ((4,), i64)]) is None


def _train_gpt_loss(steps: int = 5):
    """A GPT's head: embeddings -> linear -> cross_entropy over (B*T, V), SGD momentum."""
    flow.manual_seed(0)
    B, T, D, V = 4, 16, 32, 96
    model = nn.Sequential(nn.Embedding(V, D), nn.Linear(D, D), nn.GELU(), nn.Linear(D, V))
    opt = flow.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    rng = np.random.default_rng(0)
    idx = flow.tensor(rng.integers(0, V, (B, T)))
    tgt = flow.tensor(rng.integers(0, V, (B, T)))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            logits = self.model(a)
            loss = F.cross_entropy(logits.reshape(-1, V), b.reshape(-1))
            loss.backward()
            return loss

    g = Train()
    return g, [float(g(idx, tgt).numpy()) for _ in range(steps)]


def test_gpt_loss_trains_to_the_same_losses_with_row_kernels(monkeypatch):
    """float32 losses within 1e-5 relative over 5 steps (the row sums' order differs)."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train_gpt_loss()
    tasks = g.plan.codegen["tasks"].values()
    ops = {t["ops"][0] for t in tasks if t.get("rows")}
    assert {"cross_entropy", "cross_entropy_backward"} <= ops
    ran = [k for k in codegen.kernels_of(g.plan).values() if isinstance(k, rows.RowKernel)
           and k.task.op_type.startswith("cross_entropy")]
    assert len(ran) == 2 and all(k.calls == 5 and k.refused == 0 for k in ran)
    monkeypatch.setenv(codegen.ENV, "0")
    g_off, off = _train_gpt_loss()
    assert not any(t.generated for t in g_off.plan.tasks)
    np.testing.assert_allclose(on, off, rtol=1e-5)
    assert off[-1] < off[0]
