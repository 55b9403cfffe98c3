"""Row forms of scaled_dot_product_attention and its gradient (ops/attention_rows.py) against
the NumPy kernels, and a small causal attention model training to the same losses in nn.Graph
with generated kernels on and off.

Cases: batch dims of 1-3 dims, L != S and L == S, E != Ev, causal or not (L > S too), several
scales, float32 / float64, NaN and inf in q, k or v (before and after the causal mask), empty
arrays, head views (read in place), other non-contiguous inputs (copied), non-contiguous
outputs and calls without a form (masks, float16, mixed dtypes, dprobs, partial needs: the
NumPy kernel). Tolerance: ``_close`` of test_codegen_rows with ``n`` the longest summed length
(S + E + Ev): the products and the softmax sums run in another order than BLAS's (fma), and
the softmax shifts by the row maximum where the NumPy kernel may skip the shift."""
from __future__ import annotations

import numpy as np
import pytest

import actorflow as flow
import actorflow.nn as nn
import actorflow.nn.functional as F
from actorflow.compiler import codegen
from actorflow.compiler.codegen import rows
from actorflow.framework import dtype as dt
from actorflow.ops import attention_rows, registry
from tests.compiler.test_codegen_rows import _close

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _forms_on(monkeypatch):
    """Every attention form on (by default only the causal forward: ops/attention_rows.py)."""
    monkeypatch.setenv(attention_rows.ENV, "1")

ROW_OPS = ("scaled_dot_product_attention", "scaled_dot_product_attention_grad")
FWD, BWD = ROW_OPS
DT = {"float32": dt.float32, "float64": dt.float64}


def _kernel(op, attrs, ins, outs):
    return rows.row_kernels_for([(op, attrs, [(a.shape, DT[a.dtype.name]) for a in ins],
                                  [(a.shape, DT[a.dtype.name]) for a in outs])])[0]


def _inputs(lead, L, S, E, Ev, dtype, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(lead + shape).astype(dtype)
            for shape in ((L, E), (S, E), (S, Ev))]


def _check(lead, L, S, E, Ev, dtype, causal, scale, seed=0, special=None, expect_c=True):
    """Forward and backward of one case, generated against NumPy; returns the two kernels."""
    q, k, v = _inputs(lead, L, S, E, Ev, dtype, seed)
    if special is not None:
        special(q, k, v)
    attrs = {"scale": scale, "is_causal": causal}
    ref = [np.empty(lead + (L, Ev), dtype), np.empty(lead + (L, S), dtype)]
    registry.get(FWD).kernel_cpu([q, k, v], ref, attrs)
    got = [np.full_like(a, 7) for a in ref]
    fk = _kernel(FWD, attrs, [q, k, v], got)
    assert fk is not None
    fk([q, k, v], got, attrs)
    n = S + E + Ev
    _close(got[0], ref[0], n, "out")
    _close(got[1], ref[1], n, "probs")
    dout = np.random.default_rng(seed + 1).standard_normal(ref[0].shape).astype(dtype)
    gattrs = {"scale": scale, "needs": (True, True, True), "has_dprobs": False,
              "mask_shape": None}
    ins = [dout, q, k, v, ref[1], ref[0]]
    gref = [np.empty_like(a) for a in (q, k, v)]
    registry.get(BWD).kernel_cpu(ins, gref, gattrs)
    ggot = [np.full_like(a, 7) for a in gref]
    bk = _kernel(BWD, gattrs, ins, ggot)
    assert bk is not None
    bk(ins, ggot, gattrs)
    # dS = P (dP - rowsum(dO O)) cancels to rounding noise where a row's P is one-hot: the
    # noise is relative to the terms' size, not to the (near-zero) result
    terms = _amax(dout) * max(_amax(v), _amax(ref[0])) * abs(scale) * max(_amax(q), _amax(k))
    for name, g, r in zip(("dq", "dk", "dv"), ggot, gref):
        _close(g, r, n + L, name, floor=terms if name != "dv" else 0.0)
    if expect_c:
        assert fk.calls == 1 and bk.calls == 1, "the generated loops should have run"
    return fk, bk


def _amax(a) -> float:
    fin = a[np.isfinite(a)]
    return float(np.abs(fin).max()) if fin.size else 0.0


SHAPES = [((2, 3), 5, 7, 4, 6), ((1,), 4, 4, 8, 8), ((2, 1, 3), 9, 3, 5, 2), ((3,), 1, 6, 3, 4),
          ((2, 2), 17, 17, 16, 8), ((16, 4), 64, 64, 32, 32), ((1, 2), 6, 20, 3, 5)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_random_shapes(shape, causal, dtype):
    lead, L, S, E, Ev = shape
    for i, scale in enumerate((E ** -0.5, 1.0, 0.03)):
        _check(lead, L, S, E, Ev, np.dtype(dtype), causal, scale, seed=i)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("where", ["q", "k_masked", "k_seen", "v_masked", "v_seen", "inf_q",
                                   "huge", "scale_inf"])
def test_nan_and_inf_as_numpy(where, dtype):
    """NaN where the NumPy kernel has it, also from scores the causal mask hides (-inf + NaN)
    and zero probabilities times a non-finite v."""
    def special(q, k, v):
        if where == "q":
            q[0, 1, 2, 0] = np.nan
        elif where == "k_masked":  # key 5 is after queries 0..4
            k[0, 0, 5, 1] = np.inf
        elif where == "k_seen":
            k[1, 2, 0, 0] = -np.inf
        elif where == "v_masked":
            v[0, 1, 6, 2] = np.nan
        elif where == "v_seen":
            v[1, 0, 0, 3] = np.inf
        elif where == "inf_q":
            q[1, 1, 3, :] = np.inf
        elif where == "huge":  # finite inputs whose masked scores overflow
            big = np.finfo(q.dtype).max ** 0.5 * 4
            q[0, 0] *= big
            k[0, 0] *= big
    scale = np.inf if where == "scale_inf" else 0.5
    for causal in (True, False):
        for L in (8, 7):  # 7: the last tile of four query rows has three
            _check((2, 3), L, 9, 4, 6, np.dtype(dtype), causal, scale, special=special)


def test_empty_arrays_run_the_numpy_kernel():
    for lead, L, S, E, Ev in (((0, 2), 3, 4, 5, 6), ((2,), 0, 4, 5, 6), ((2,), 3, 0, 5, 6),
                              ((2,), 3, 4, 5, 0)):
        _check(lead, L, S, E, Ev, np.dtype("float32"), True, 0.5, expect_c=False)


def _call_of(kern):
    call, = kern.prepared.values()
    return call


def test_head_views_are_read_in_place_and_outputs_refused():
    """q, k, v and dout as a model's heads are, (B, H, T, E) transposes of (B, T, H, E): the
    kernels address their rows through two strides and gather each row in C (no copy made
    in Python: row_layout.py); a second call sees new values; a layout of three leading
    groups or a strided last dim is copied first; a non-contiguous output is refused."""
    rng = np.random.default_rng(3)
    B, T, H, E = 2, 6, 3, 4
    base = [np.empty((B, T, H, E), np.float32) for _ in range(4)]
    q, k, v, dout = (b.transpose(0, 2, 1, 3) for b in base)
    attrs = {"scale": 0.5, "is_causal": True}
    gattrs = {"scale": 0.5, "needs": (True, True, True), "has_dprobs": False,
              "mask_shape": None}
    got = [np.empty((B, H, T, E), np.float32), np.empty((B, H, T, T), np.float32)]
    ggot = [np.empty((B, H, T, E), np.float32) for _ in range(3)]
    kern = _kernel(FWD, attrs, [q, k, v], got)
    bk = _kernel(BWD, gattrs, [dout, q, k, v, got[1], got[0]], ggot)
    for step in range(2):
        for b in base:
            b[...] = rng.standard_normal(b.shape) * (step + 1)
        ref = [np.empty_like(a) for a in got]
        registry.get(FWD).kernel_cpu([q, k, v], ref, attrs)
        kern([q, k, v], got, attrs)
        _close(got[0], ref[0], T + 2 * E, f"out, call {step}")
        _close(got[1], ref[1], T + 2 * E, f"probs, call {step}")
        ins = [dout, q, k, v, got[1], got[0]]
        gref = [np.empty_like(a) for a in ggot]
        registry.get(BWD).kernel_cpu(ins, gref, gattrs)
        bk(ins, ggot, gattrs)
        for name, g, r in zip(("dq", "dk", "dv"), ggot, gref):
            _close(g, r, 2 * T + 2 * E, f"{name}, call {step}", floor=1e-3)
    assert kern.calls == 2 and bk.calls == 2
    assert not _call_of(kern).refresh and not _call_of(bk).refresh  # nothing copied
    # (2, B, H) leading dims in three groups, and a strided last dim: copied before the call
    three = np.empty((B, 2, H, T, E), np.float32).transpose(1, 0, 2, 3, 4)
    for odd in (three, np.empty((B, H, T, 2 * E), np.float32)[..., ::2]):
        odd[...] = rng.standard_normal(odd.shape)
        kk, vv = (rng.standard_normal(odd.shape).astype(np.float32) for _ in range(2))
        out = [np.empty(odd.shape, np.float32), np.empty(odd.shape[:-1] + (T,), np.float32)]
        one = _kernel(FWD, attrs, [odd, kk, vv], out)
        one([odd, kk, vv], out, attrs)
        ref = [np.empty_like(a) for a in out]
        registry.get(FWD).kernel_cpu([odd, kk, vv], ref, attrs)
        _close(out[0], ref[0], T + 2 * E, "out of a copied q")
        assert len(_call_of(one).refresh) == 1
    strided = np.empty((B, T, H, E), np.float32).transpose(0, 2, 1, 3)
    probs = np.empty_like(got[1])
    kern([q, k, v], [strided, probs], attrs)  # not C-contiguous: the NumPy kernel
    assert kern.calls == 2
    ref = [np.empty_like(a) for a in got]
    registry.get(FWD).kernel_cpu([q, k, v], ref, attrs)
    np.testing.assert_array_equal(strided, ref[0])


def test_calls_without_a_form_have_no_kernel(monkeypatch):
    f32, f16, f64 = dt.float32, dt.float16, dt.float64
    qs, ps = (2, 3, 4), (2, 3, 3)
    a = {"scale": 0.5, "is_causal": False}
    g = {"scale": 0.5, "needs": (True, True, True), "has_dprobs": False, "mask_shape": None}
    ins = [(qs, f32)] * 4 + [(ps, f32), (qs, f32)]
    causal = dict(a, is_causal=True)
    fwd = [(qs, f32)] * 3, [(qs, f32), (ps, f32)]
    assert rows.row_task(FWD, a, *fwd) is not None
    monkeypatch.delenv(attention_rows.ENV)  # by default: both forms
    assert rows.row_task(FWD, a, *fwd) is not None
    assert rows.row_task(FWD, causal, *fwd) is not None
    assert rows.row_task(BWD, g, ins, [(qs, f32)] * 3) is not None
    monkeypatch.setenv(attention_rows.ENV, "0")
    assert rows.row_task(FWD, causal, *fwd) is None
    assert rows.row_task(FWD, a, *fwd) is None
    assert rows.row_task(BWD, g, ins, [(qs, f32)] * 3) is None
    monkeypatch.setenv(attention_rows.ENV, "1")
    assert rows.row_task(FWD, a, [(qs, f32)] * 3 + [((3, 3), dt.bool_)],
                         [(qs, f32), (ps, f32)]) is None  # a mask
    assert rows.row_task(FWD, a, [(qs, f16)] * 3, [(qs, f16), (ps, f16)]) is None
    assert rows.row_task(FWD, a, [(qs, f32), (qs, f64), (qs, f32)],
                         [(qs, f64), (ps, f64)]) is None  # mixed dtypes
    assert rows.row_task(FWD, a, [(qs, f32), ((3, 3, 4), f32), ((3, 3, 4), f32)],
                         [((3, 3, 4), f32), ((3, 3, 3), f32)]) is None  # broadcast batch
    assert rows.row_task(BWD, g, ins, [(qs, f32)] * 3) is not None
    assert rows.row_task(BWD, dict(g, needs=(True, False, True)), ins, [(qs, f32)] * 3) is None
    assert rows.row_task(BWD, dict(g, has_dprobs=True), ins + [(ps, f32)],
                         [(qs, f32)] * 3) is None
    assert rows.row_task(BWD, dict(g, mask_shape=(3, 3)), ins,
                         [(qs, f32)] * 3 + [((3, 3), f32)]) is None


class _Attention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.H = H
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.H, D // self.H).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.permute(0, 2, 1, 3).reshape(B, T, D))


def _train(steps: int = 5):
    flow.manual_seed(0)
    B, T, D = 4, 16, 32
    model = _Attention(D, 4)
    opt = flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((B, T, D)).astype(np.float32))
    y = flow.tensor(rng.standard_normal((B, T, D)).astype(np.float32))

    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, a, b):
            loss = ((self.model(a) - b) ** 2).mean()
            loss.backward()
            return loss

    g = Train()
    return g, [float(g(x, y).numpy()) for _ in range(steps)]


def test_causal_attention_trains_to_the_same_losses_with_generated_kernels(monkeypatch):
    """float32 losses within 1e-5 relative over 5 steps (the products' order differs)."""
    monkeypatch.setenv(codegen.ENV, "1")
    g, on = _train()
    ran = [k for k in codegen.kernels_of(g.plan).values() if isinstance(k, rows.RowKernel)
           and k.task.op_type in ROW_OPS]
    assert {k.task.op_type for k in ran} == set(ROW_OPS)
    assert all(k.calls == 5 for k in ran)
    monkeypatch.setenv(codegen.ENV, "0")
    g_off, off = _train()
    assert not any(t.generated for t in g_off.plan.tasks)
    np.testing.assert_allclose(on, off, rtol=1e-5)
    assert off[-1] < off[0]
