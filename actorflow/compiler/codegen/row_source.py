"""C source of row kernels (``rows.py`` says what a row kernel is and runs it): the row loop
around an op's ``c_row`` body, the optional pass over all rows before it (``CRow.pre``), and
the math the bodies may call besides ``<tgmath.h>``'s.

The row function::

    void name(char **p, const int64_t *rs, int64_t n, int64_t start, int64_t stop,
              double pre_total)

and, for a form with a ``pre`` part, the pass run over all rows first (one thread)::

    int64_t name_pre(char **p, const int64_t *rs, int64_t n, int64_t rows, double *total)

which returns -1, or the first row that said ``REFUSE()``, and sets ``*total`` to the sum of
what the rows gave ``PRE_ADD``. Macros: ``X<k>(i)`` loads element ``i`` of input ``k``'s row
as the computing type (``int64_t`` for an ``"index"`` array); ``Y<j>(i, v)`` stores ``v`` (a
``"sum"`` output adds it to its chunk's partial sums, a ``"total"`` or ``"mean"`` output adds
it to its chunk's double accumulator); ``S<k>(i)`` is element ``i`` of the chunk's scratch row
``k`` (``CRow.scratch``), in the computing type.
"""
from __future__ import annotations

from actorflow.compiler.codegen import emit
from actorflow.compiler.codegen.row_layout import ROW_MACRO
from actorflow.compiler.codegen.row_layout import ROW_WORDS as W

# integer dtypes an "index" array may have: storage C type
INDEX_TYPES = {"int64": "int64_t", "int32": "int32_t", "int16": "int16_t", "int8": "int8_t",
               "uint8": "uint8_t"}
TOTALS = ("total", "mean")  # output kinds accumulated in one double per chunk

# math the row forms may call besides <tgmath.h>'s: af_exp(v), exp in the type of v; for float,
# inlined so that a row loop calling it is vectorised (libm's expf is a call per element):
# exp(x) = 2^k exp(r), k = rint(x / ln 2), r = x - k ln 2 in two parts (Cody-Waite), exp(r) by
# Cephes' polynomial (measured: within 1 ulp of the correctly rounded result over [-110, 95]);
# 2^k applied as two factors, so results that are subnormal or overflow to inf round once as
# libm's do; NaN gives NaN (rint(NaN) converts to some integer; p is NaN), -inf 0, +inf inf.
# AF_FMA(a, b, c): a * b + c rounded once, where the CPU has FMA (else two roundings: fmaf
# without the instruction is a libm call per element, never vectorised). Used only inside such
# approximations (af_exp, gelu's polynomial), whose results differ from NumPy's by an ulp
# anyway; everywhere else -ffp-contract=off keeps NumPy's two roundings (build.py). Measured
# on the 2-core AVX-512 machine: gelu over 1024 x 512 on one thread 0.56 -> 0.40 ms.
ROW_PRELUDE = r"""
#ifdef __FMA__
#define AF_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define AF_FMA(a, b, c) ((a) * (b) + (c))
#endif
static inline float af_pow2i(int32_t m) {  /* 2^m for -126 <= m <= 127 */
    const uint32_t u = (uint32_t)(m + 127) << 23; float f; memcpy(&f, &u, 4); return f;
}
static inline float af_expf(float x) {
    float c = x < -104.0f ? -104.0f : x;      /* NaN stays NaN, and so does the result */
    c = c > 89.0f ? 89.0f : c;
    const float k = rintf(c * 1.44269504088896341f);
    float r = c - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = AF_FMA(p, r, 1.3981999507e-3f);
    p = AF_FMA(p, r, 8.3334519073e-3f);
    p = AF_FMA(p, r, 4.1665795894e-2f);
    p = AF_FMA(p, r, 1.6666665459e-1f);
    p = AF_FMA(p, r, 5.0000001201e-1f);
    p = p * (r * r) + r + 1.0f;
    const int32_t ki = (int32_t)k, k1 = ki / 2;
    return (p * af_pow2i(k1)) * af_pow2i(ki - k1);
}
#define af_exp(v) _Generic((v), float: af_expf, default: exp)(v)
/* where row r of array a starts (row_layout.py: outer, inner, count, sub per array) */
""" + ROW_MACRO


def _pointers_and_macros(task, ct: str, outputs: bool) -> tuple:
    """The row's array pointers (C lines) and its ``X`` / ``Y`` macros (name, expansion)."""
    lines, macros = [], []
    for a, (kind, d) in enumerate(zip(task.kinds, task.dtypes)):
        if a >= task.n_in and not outputs:
            break
        index = kind == "index"
        if index:
            store_t, load, store = INDEX_TYPES[d.name], "{}", "(" + INDEX_TYPES[d.name] + ")({})"
        else:
            store_t, _, load, store = emit._TYPES[d.name]
        if a < task.n_in:
            lines.append(f"const {store_t} *x{a} = (const {store_t} *)p[{a}] + AF_ROW(rs, {a}, r);")
            if outputs and task.gather[a]:
                m, q = task.gather[a]
                g = len(task.kinds) + task.scratch + sum(1 for x in task.gather[:a] if x)
                lines.append(f"if (rs[{W * a + 3}] != {m}) {{  /* sub-rows apart: gathered */")
                lines.append(f"    {store_t} *gb = ({store_t} *)p[{g}];")
                lines.append(f"    for (int64_t u = 0; u < {q}; u++) memcpy(gb + u * {m}, "
                             f"x{a} + u * rs[{W * a + 3}], {m} * sizeof({store_t}));")
                lines.append(f"    x{a} = gb;")
                lines.append("}")
            vt = "int64_t" if index else ct
            macros.append((f"X{a}(i)", f"(({vt})({load.format(f'x{a}[(i)]')}))"))
            continue
        j = a - task.n_in
        if kind == "sum":  # the chunk's partial sums, in the computing type
            lines.append(f"{ct} *y{j} = ({ct} *)p[{a}];")
            macros.append((f"Y{j}(i, v)", f"(y{j}[(i)] += ({ct})(v))"))
        elif kind in TOTALS:  # the chunk's one accumulator
            lines.append(f"double *y{j} = (double *)p[{a}];")
            macros.append((f"Y{j}(i, v)", f"(y{j}[0] += (double)(v))"))
        else:
            lines.append(f"{store_t} *y{j} = ({store_t} *)p[{a}] + r * rs[{W * a}];")
            macros.append((f"Y{j}(i, v)", f"(y{j}[(i)] = {store.format('(v)')})"))
    if outputs:  # the chunk's scratch rows, after the outputs' pointers
        for k in range(task.scratch):
            lines.append(f"{ct} *s{k} = ({ct} *)p[{len(task.kinds) + k}];")
            macros.append((f"S{k}(i)", f"s{k}[(i)]"))
    return lines, macros


def _row_block(task, body: str, ct: str, outputs: bool, extra: tuple = ()) -> list:
    """The statements computing row ``r``: pointers, macros, the body, the macros undefined."""
    ptrs, macros = _pointers_and_macros(task, ct, outputs)
    macros += list(extra)
    pad = " " * 8
    lines = [pad + ln for ln in ptrs]
    lines += [f"#define {m} {e}" for m, e in macros]
    lines.append(pad + "{")
    lines += [pad + "    " + ln for ln in body.strip().splitlines()]
    lines.append(pad + "}")
    lines += [f"#undef {m.split('(')[0]}" for m, _ in macros]
    return lines


def emit_row_kernel(name: str, task) -> str:
    """The C functions of ``task`` (a ``rows.RowTask``): ``name`` and, when the form has a
    ``pre`` part, ``name_pre`` (see the module docstring)."""
    ct = emit.value_type(task.dtypes[task.rows_of])
    attr = "__attribute__((optimize(\"tree-vectorize\")))"
    # A task built for one row length has it as a constant (the caller checks each call's):
    # its loops then have known trip counts, measured on the 2-core Zen 4 EPYC: layer_norm's
    # row of 128 floats 60 -> 50 ns.
    fixed = [f"    const int64_t n = {int(task.n)}; (void)n_arg;"] if task.n else []
    n_param = "n_arg" if task.n else "n"
    lines = []
    if task.pre:
        lines += [f"{attr} int64_t {name}_pre(char **p, const int64_t *rs, int64_t {n_param}, "
                  "int64_t rows, double *total) {", *fixed,
                  "    double pre = 0;",
                  "    for (int64_t r = 0; r < rows; r++) {"]
        lines += _row_block(task, task.pre, ct, False,
                            (("REFUSE()", "return r"), ("PRE_ADD(v)", "(pre += (double)(v))")))
        lines += ["    }", "    *total = pre;", "    return -1;", "}"]
    lines += [f"{attr} void {name}(char **p, const int64_t *rs, int64_t {n_param}, "
              "int64_t start, int64_t stop, double pre_total) {", *fixed,
              "    (void)pre_total;",
              "    for (int64_t r = start; r < stop; r++) {"]
    lines += _row_block(task, task.body, ct, True)
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["ROW_PRELUDE", "INDEX_TYPES", "TOTALS", "emit_row_kernel"]
