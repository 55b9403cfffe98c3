"""scaled_dot_product_attention and its gradient as row forms for generated C (``c_row``,
ops/registry.py), beside their NumPy kernels in ``ops/attention.py``, which stay the reference.

One "row" is one (batch, head) block: q (L, E) is the row (``row_dims=2``), k (S, E), v (S, Ev),
probs (L, S) and out (L, Ev) are ``"block"`` arrays, and the sizes reach the C as ``$L``,
``$S``, ``$E``, ``$Ev``. Covered: float32 and float64 (float16 / bfloat16, masks, a gradient
arriving at the probabilities, the mask's gradient and partial ``needs`` run the NumPy kernel),
``scale``, ``is_causal`` (top-left aligned: query i sees keys j <= i). Every call they cover
uses them unless ``ACTORFLOW_GRAPH_CODEGEN_ATTENTION=0``. Measured on the 2-core AVX2 EPYC at
the benchmark GPT's shapes (``benchmarks/attention_codegen.py``): forward 2.2x (causal) and
1.7x faster than the NumPy kernel, backward 2.3x and 1.4x; in the GPT's graph, where q, k, v
are head views the kernel reads in place (``compiler/codegen/row_layout.py``), the step went
from 129 to 121 ms with the backward on. (Session 16 had kept the backward and the
non-causal forward off: on the AVX-512 machine, with q, k, v copied in Python each call, they
measured no faster than the NumPy kernels' batched BLAS.)

The products are written to vectorise: k (and, backward, v) is transposed into scratch once per
block so the score loop runs over contiguous keys, and the sums are taken with ``fma`` in an
order of their own (BLAS reorders them too), so results agree with the NumPy kernels within a
few ulps times the summed length. The softmax shifts by the row maximum (NaN kept) and uses
``af_exp``.

NaN and inf as the NumPy kernel: it adds -inf to the causally masked scores (NaN where that
score is NaN or +inf) and multiplies the zero probabilities by v (NaN where v is not finite).
A causal block skips the masked keys only when it can prove they contribute exactly what
NumPy's would: every q and k finite with |scale| E max|q| max|k| far from overflow (no masked
score is NaN or inf), and, for the products with v, every v finite; else it computes them all.
The backward (whose op has no ``is_causal``) skips the keys after each query when the block's
probabilities there are all 0, its inputs are finite and the dP products can't overflow.
"""
from __future__ import annotations

from actorflow.ops.attention import sdpa, sdpa_grad
from actorflow.ops.registry import CRow
from actorflow.settings import env_flag

# 0: neither form (the NumPy kernels); unset or 1: both, for every call they cover
ENV = "ACTORFLOW_GRAPH_CODEGEN_ATTENTION"

# |value| below which the bounds of a block's products count as safe from overflow
_SAFE = "(sizeof($T) == 4 ? 1e30 : 1e300)"

# max |x| of n loaded values X (as $T, NaN and inf set `bad`), vectorised: reductions only
def _scan(x: str, n: str, am: str) -> str:
    return (f"#pragma omp simd reduction(max:{am}) reduction(|:bad)\n"
            f"for (int64_t a = 0; a < {n}; a++) {{ const $T t = {x}(a), u = fabs(t);\n"
            f"    {am} = u > {am} ? u : {am}; bad |= (t - t) != (t - t); }}\n")


# Rows are taken four at a time (a tile): each value of k^T, v, ... loaded once serves four
# query rows; a causal tile computes the keys up to its last row. Scratch rows are consecutive
# and each holds the call's longest block (>= S * E, S * Ev, L * E, L * Ev), so four of them
# hold a tile's four score rows of S values, or its four output rows.
_FORWARD = """const int64_t L = $L, S = $S, E = $E, EV = $Ev;
const int causal = CAUSAL;
const $T scale = $scale;
$T *kt = &S0(0), *s = &S1(0), *o = &S5(0), *qs = &S9(0);  /* s: S1..S4, o: S5..S8, qs: S9..S12 */
$T amq = 0, amk = 0, amv = 0;
int bad = 0;
""" + _scan("X0", "L * E", "amq") + _scan("X1", "S * E", "amk") + """const int qkfin = !bad;
""" + _scan("X2", "S * EV", "amv") + """const int vfin = !bad;
for (int64_t j = 0; j < S; j++)
    for (int64_t e = 0; e < E; e++) kt[e * S + j] = X1(j * E + e);
/* all scores computed unless the masked ones are provably finite (then -inf once masked) */
const int full = !(qkfin && fabs((double)scale) * (double)E * amq * amk < SAFE);
$T *s0 = s, *s1 = s + S, *s2 = s + 2 * S, *s3 = s + 3 * S;
$T *o0 = o, *o1 = o + EV, *o2 = o + 2 * EV, *o3 = o + 3 * EV;
for (int64_t i0 = 0; i0 < L; i0 += 4) {
    const int64_t nr = L - i0 < 4 ? L - i0 : 4;
    /* keys computed: up to the tile's last row, rounded up to whole vectors (those extra,
       masked scores are finite here, so -inf once masked) */
    const int64_t jc = (i0 + nr + 15) & ~(int64_t)15;
    const int64_t jt = full || !causal ? S : (jc < S ? jc : S);
    for (int64_t e = 0; e < 4 * E; e++) qs[e] = 0;
    for (int64_t e = 0; e < nr * E; e++) qs[e] = X0(i0 * E + e) * scale;
    #pragma omp simd
    for (int64_t j = 0; j < jt; j++) {  /* scores: the sums over e in registers */
        $T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t e = 0; e < E; e++) {
            const $T kv = kt[e * S + j];
            a0 = fma(qs[e], kv, a0); a1 = fma(qs[E + e], kv, a1);
            a2 = fma(qs[2 * E + e], kv, a2); a3 = fma(qs[3 * E + e], kv, a3);
        }
        s0[j] = a0; s1[j] = a1; s2[j] = a2; s3[j] = a3;
    }
    for (int64_t r = 0; r < nr; r++) {
        const int64_t i = i0 + r;
        $T *sr = s + r * S;
        const int64_t jn = causal ? (i + 1 < S ? i + 1 : S) : S;
        /* the softmax runs over the keys up to jn when the masked scores are finite (their
           -inf gives exactly 0 and never the maximum, as key 0 is unmasked); else over all */
        const int64_t js = full ? jt : (jn < jt ? jn : jt);
        for (int64_t j = jn; j < jt; j++) sr[j] += -($T)INFINITY;
        $T m = -($T)INFINITY;
        int nan = 0;
        #pragma omp simd reduction(max:m) reduction(|:nan)
        for (int64_t j = 0; j < js; j++) { m = sr[j] > m ? sr[j] : m; nan |= sr[j] != sr[j]; }
        if (nan) m = ($T)NAN;
        $T tot = 0;
        #pragma omp simd reduction(+:tot)
        for (int64_t j = 0; j < js; j++) { sr[j] = af_exp(sr[j] - m); tot += sr[j]; }
        for (int64_t j = js; j < jt; j++) sr[j] = 0;
        const $T rc = ($T)1 / tot;
        for (int64_t j = 0; j < js; j++) { sr[j] *= rc; Y1(i * S + j, sr[j]); }
        for (int64_t j = js; j < S; j++) Y1(i * S + j, 0);
    }
    const int64_t jv = vfin ? jt : S;
    for (int64_t j = jt; j < jv; j++) { s0[j] = 0; s1[j] = 0; s2[j] = 0; s3[j] = 0; }
    #pragma omp simd
    for (int64_t c = 0; c < EV; c++) {  /* out = P V, the sums over j in registers */
        $T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t j = 0; j < jv; j++) {
            const $T vv = X2(j * EV + c);
            a0 = fma(s0[j], vv, a0); a1 = fma(s1[j], vv, a1);
            a2 = fma(s2[j], vv, a2); a3 = fma(s3[j], vv, a3);
        }
        o0[c] = a0; o1[c] = a1; o2[c] = a2; o3[c] = a3;
    }
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < EV; c++) Y0((i0 + r) * EV + c, o[r * EV + c]);
}
"""

_BACKWARD = """const int64_t L = $L, S = $S, E = $E, EV = $Ev;
const $T scale = $scale;
$T *vt = &S0(0), *ks = &S1(0), *dva = &S2(0), *dka = &S3(0);
$T *ds = &S4(0), *dq = &S8(0), *g = &S12(0);  /* ds: S4..S7, dq: S8..S11, g: S12..S15 */
$T *qt = &S16(0);  /* the tile's q rows times scale: S16..S19 */
$T ado = 0, av = 0, ao = 0, aq = 0, ak = 0;
int bad = 0;
""" + _scan("X0", "L * EV", "ado") + _scan("X5", "L * EV", "ao") + _scan("X3", "S * EV", "av") \
    + _scan("X1", "L * E", "aq") + _scan("X2", "S * E", "ak") + """
for (int64_t j = 0; j < S; j++)
    for (int64_t c = 0; c < EV; c++) vt[c * S + j] = X3(j * EV + c);
for (int64_t a = 0; a < S * E; a++) ks[a] = X2(a) * scale;
/* keys after a query skipped where its probabilities are 0 and contribute exact zeros */
int skip = !bad && (double)EV * ado * ((double)av + ao) < SAFE;
for (int64_t i = 0; i < L && skip; i++)
    for (int64_t j = i + 1; j < S; j++) skip &= X4(i * S + j) == 0;
for (int64_t a = 0; a < S * EV; a++) dva[a] = 0;
for (int64_t a = 0; a < S * E; a++) dka[a] = 0;
$T *d0 = ds, *d1 = ds + S, *d2 = ds + 2 * S, *d3 = ds + 3 * S;
$T *q0 = dq, *q1 = dq + E, *q2 = dq + 2 * E, *q3 = dq + 3 * E;
for (int64_t i0 = 0; i0 < L; i0 += 4) {
    const int64_t nr = L - i0 < 4 ? L - i0 : 4;
    const int64_t jc = (i0 + nr + 15) & ~(int64_t)15;  /* whole vectors: zeros add zeros */
    const int64_t jt = skip ? (jc < S ? jc : S) : S;
    /* the tile's dout rows and scaled q rows, zero past its last row, so that the products
       below need no test of the row count (a zero row adds exact zeros) */
    for (int64_t c = 0; c < 4 * EV; c++) g[c] = 0;
    for (int64_t c = 0; c < nr * EV; c++) g[c] = X0(i0 * EV + c);
    for (int64_t e = 0; e < 4 * E; e++) qt[e] = 0;
    for (int64_t e = 0; e < nr * E; e++) qt[e] = X1(i0 * E + e) * scale;
    #pragma omp simd
    for (int64_t j = 0; j < jt; j++) {  /* dP = dO V^T, the sums over c in registers */
        $T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t c = 0; c < EV; c++) {
            const $T w = vt[c * S + j];
            a0 = fma(g[c], w, a0); a1 = fma(g[EV + c], w, a1);
            a2 = fma(g[2 * EV + c], w, a2); a3 = fma(g[3 * EV + c], w, a3);
        }
        d0[j] = a0; d1[j] = a1; d2[j] = a2; d3[j] = a3;
    }
    for (int64_t r = nr; r < 4; r++)  /* rows past the tile: 0, also where v is not finite */
        for (int64_t j = 0; j < jt; j++) ds[r * S + j] = 0;
    $T p[4] = {0, 0, 0, 0};
    for (int64_t r = 0; r < nr; r++) {  /* dS = P (dP - rowsum(dO O)) */
        const int64_t i = i0 + r;
        $T rd = 0;
        #pragma omp simd reduction(+:rd)
        for (int64_t c = 0; c < EV; c++) rd += X0(i * EV + c) * X5(i * EV + c);
        $T *dr = ds + r * S;
        for (int64_t j = 0; j < jt; j++) dr[j] = (dr[j] - rd) * X4(i * S + j);
    }
    for (int64_t j = 0; j < jt; j++) {  /* dV += P^T dO, dK += dS^T (Q scale) */
        for (int64_t r = 0; r < 4; r++) p[r] = r < nr ? X4((i0 + r) * S + j) : 0;
        const $T t0 = d0[j], t1 = d1[j], t2 = d2[j], t3 = d3[j];
        #pragma omp simd
        for (int64_t c = 0; c < EV; c++) {
            $T a = dva[j * EV + c];
            a = fma(p[0], g[c], a); a = fma(p[1], g[EV + c], a);
            a = fma(p[2], g[2 * EV + c], a); a = fma(p[3], g[3 * EV + c], a);
            dva[j * EV + c] = a;
        }
        #pragma omp simd
        for (int64_t e = 0; e < E; e++) {
            $T a = dka[j * E + e];
            a = fma(t0, qt[e], a); a = fma(t1, qt[E + e], a);
            a = fma(t2, qt[2 * E + e], a); a = fma(t3, qt[3 * E + e], a);
            dka[j * E + e] = a;
        }
    }
    #pragma omp simd
    for (int64_t e = 0; e < E; e++) {  /* dQ = dS (K scale), the sums over j in registers */
        $T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int64_t j = 0; j < jt; j++) {
            const $T kv = ks[j * E + e];
            a0 = fma(d0[j], kv, a0); a1 = fma(d1[j], kv, a1);
            a2 = fma(d2[j], kv, a2); a3 = fma(d3[j], kv, a3);
        }
        q0[e] = a0; q1[e] = a1; q2[e] = a2; q3[e] = a3;
    }
    for (int64_t r = 0; r < nr; r++)
        for (int64_t e = 0; e < E; e++) Y0((i0 + r) * E + e, dq[r * E + e]);
}
for (int64_t a = 0; a < S * E; a++) Y1(a, dka[a]);
for (int64_t a = 0; a < S * EV; a++) Y2(a, dva[a]);
"""

_FLOATS = ("float32", "float64")


def _body(template: str, causal: bool) -> str:
    return template.replace("CAUSAL", "1" if causal else "0").replace("SAFE", _SAFE)


def _forward_row(attrs: dict, n_inputs: int) -> CRow | None:
    """The forward for q, k, v without a mask: out and probs of one (batch, head) block
    (unless ``ACTORFLOW_GRAPH_CODEGEN_ATTENTION=0``)."""
    if n_inputs != 3 or not env_flag(ENV, True):
        return None
    return CRow(_body(_FORWARD, bool(attrs["is_causal"])), ("row", "block", "block", "block",
                                                             "block"),
                row_dims=2, scratch=13, floats=_FLOATS,
                dims=(("L", 0, -2), ("E", 0, -1), ("S", 1, -2), ("Ev", 2, -1)))


def _backward_row(attrs: dict, n_inputs: int) -> CRow | None:
    """dq, dk, dv of one block from dout, q, k, v, probs, out (no dprobs, no mask gradient,
    every gradient wanted; unless ``ACTORFLOW_GRAPH_CODEGEN_ATTENTION=0``)."""
    if not env_flag(ENV, True) or n_inputs != 6 or attrs.get("has_dprobs") \
            or attrs.get("mask_shape") is not None or not all(attrs["needs"]):
        return None
    return CRow(_body(_BACKWARD, False), ("row",) + ("block",) * 8,
                row_dims=2, scratch=20, floats=_FLOATS,
                dims=(("L", 0, -2), ("Ev", 0, -1), ("E", 1, -1), ("S", 2, -2)))


sdpa.c_row = _forward_row
sdpa_grad.c_row = _backward_row
