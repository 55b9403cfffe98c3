"""How ``cross_entropy`` and ``cross_entropy_backward`` (ops/loss.py) compute one row in
generated C (``c_row``, ops/registry.py), beside their NumPy kernels, which stay the reference.

A row is one position's class scores: the calls these forms take are 1-D or 2-D inputs
(classes last: ``(C,)`` or ``(N, C)``, the GPT's ``(B*T, V)``) with integer class-index
targets (``"index"``: int64, int32...), with or without a class ``weight``, any
``ignore_index``, ``label_smoothing`` and reduction. Class-probability targets (a float target
shaped as the input) and inputs of more dims (classes in dim 1, not last) get no row form:
their calls run the NumPy kernels.

The reduction: 'none' stores one loss per row (``"stat"``); 'sum' a ``"total"`` (the row
losses summed in double); 'mean' a ``"mean"``: that sum divided by the summed weights of the
counted targets, which the ``pre`` pass adds up (1 per target, ``weight[target]`` with a
weight; ignored targets 0). The same pass refuses a target outside ``[0, C)`` that is not
``ignore_index``: the call then runs the NumPy kernel, which raises the op's error. The
backward reads the incoming gradient as ``"stat"`` ('none') or ``"scalar"``, the same ``pre``
total for a mean, and may write ``dx`` over the saved probabilities (in place).

Arithmetic: the kernels' own steps (the row max as np.max: NaN wins; exponentials shifted by
it; log of their sum; the loss times the target's weight, also for an ignored target, whose
weight is 0, so a NaN row still gives NaN as in the kernel), except that the forward shifts
every row by its own max where the NumPy kernel may shift a whole batch of close values by
one, and sums in another order: the two agree within a few ulps times the row length.
"""
from __future__ import annotations

from actorflow.ops.loss import cross_entropy, cross_entropy_backward
from actorflow.ops.reduce import ROW_MAX
from actorflow.ops.registry import CRow

_LOSS_KIND = {"none": "stat", "sum": "total", "mean": "mean"}
_INT64 = 1 << 63


def _target(index: int, weight: str | None, ign: int, check: bool = False) -> str:
    """C statements: the row's target ``t0``, the class it reads ``t`` (0 when ignored),
    ``keep`` (0 or 1) and ``wy``, the target's weight (``keep`` without a weight); with
    ``check``, a target out of range that is not ignored refuses first."""
    wy = f"{weight.format('t')} * keep" if weight else "keep"
    refuse = f"if (t0 != {ign}LL && (t0 < 0 || t0 >= n)) REFUSE();\n" if check else ""
    return (f"const int64_t t0 = X{index}(0);\n" + refuse
            + f"const int64_t t = t0 == {ign}LL ? 0 : t0;\n"
            f"const $T keep = t0 == {ign}LL ? ($T)0 : ($T)1;\n"
            f"const $T wy = {wy};\n")


def _pre(index: int, weight: str | None, ign: int, mean: bool) -> str:
    """The pass over all rows: refuse an out-of-range target; for a mean, add up ``wy``."""
    return _target(index, weight, ign, check=True) + ("PRE_ADD(wy);" if mean else "(void)wy;")


def _attrs_of(attrs: dict):
    """(reduction, ignore_index, label_smoothing) of a call a row form takes, or None."""
    red, ign = attrs.get("reduction"), attrs.get("ignore_index", -100)
    eps = float(attrs.get("label_smoothing", 0.0))
    if red not in _LOSS_KIND or isinstance(ign, bool) or not isinstance(ign, int):
        return None
    if not -_INT64 < ign < _INT64:
        return None
    return red, ign, eps


def _weight_total(weight: str | None) -> str:
    """C statements: ``wt``, the classes' summed weights (``n`` without a weight), a double."""
    if weight is None:
        return "const double wt = (double)n;\n"
    return f"""$T wsum = 0;
#pragma omp simd reduction(+:wsum)
for (int64_t i = 0; i < n; i++) wsum += {weight.format('i')};
const double wt = (double)wsum;
"""


def _cross_entropy_row(attrs, n_inputs):
    got = _attrs_of(attrs)
    if got is None or n_inputs not in (2, 3):
        return None
    red, ign, eps = got
    weight = "X2({})" if n_inputs == 3 else None
    body = _target(1, weight, ign) + ROW_MAX + """$T s = 0;
#pragma omp simd reduction(+:s)
for (int64_t i = 0; i < n; i++) { const $T e = af_exp(X0(i) - m); S0(i) = e; s += e; }
for (int64_t i = 0; i < n; i++) Y1(i, S0(i) / s);
const $T lse = log(s);
$T loss = (lse - (X0(t) - m)) * wy;
"""
    if eps:
        wsm = " * X2(i)" if weight else ""
        body += _weight_total(weight) + f"""$T sm = 0;
#pragma omp simd reduction(+:sm)
for (int64_t i = 0; i < n; i++) sm += (X0(i) - m){wsm};
const $T smooth = (($T)wt * lse - sm) * keep;
loss = ($T)(1.0 - {eps!r}) * loss + ($T)({eps!r} / (double)n) * smooth;
"""
    body += "Y0(0, loss);"
    kinds = ("row", "index") + ("param",) * (n_inputs - 2) + (_LOSS_KIND[red], "row")
    return CRow(body, kinds, max_ndim=2, pre=_pre(1, weight, ign, red == "mean"), scratch=1)


def _cross_entropy_backward_row(attrs, n_inputs):
    got = _attrs_of(attrs)
    needs = tuple(attrs.get("needs", ()))
    if got is None or n_inputs not in (4, 5) or not needs or not needs[0] or any(needs[1:]):
        return None
    red, ign, eps = got
    weight = "X3({})" if n_inputs == 5 else None
    prob = n_inputs - 1
    g = {"none": "(double)X0(0)", "sum": "(double)X0(0)", "mean": "(double)X0(0) / pre_total"}
    body = _target(2, weight, ign) + f"""const double g = {g[red]};
const double gm = keep != 0 ? g : 0.0;
"""
    if weight:  # as the kernel: the target's share in the dtype, times its weight
        body += f"const $T at = keep != 0 ? ($T)(g * (1.0 - {eps!r})) * wy : ($T)0;\n"
    else:
        body += f"const $T at = ($T)(gm * (1.0 - {eps!r}));\n"
    spread = ""
    if eps:
        body += _weight_total(weight)
        body += (f"const $T total = at + ($T)(gm * ({eps!r} * wt / (double)n));\n" if weight
                 else f"const $T total = ($T)(gm * (1.0 - {eps!r}) + "
                      f"gm * ({eps!r} * wt / (double)n));\n")
        body += f"const $T sp = ($T)(gm * ({eps!r} / (double)n));\n"
        spread = "    d -= sp * X3(i);\n" if weight else "    d -= sp;\n"
    else:
        body += "const $T total = at;\n"
    body += f"""for (int64_t i = 0; i < n; i++) {{
    $T d = X{prob}(i) * total;
{spread}    d = i == t ? d - at : d;
    Y0(i, d);
}}"""
    kinds = (("stat" if red == "none" else "scalar"), "row", "index") \
        + ("param",) * (n_inputs - 4) + ("row", "row")
    return CRow(body, kinds, rows_of=1, max_ndim=2, in_place=((0, prob),),
                pre=_pre(2, weight, ign, red == "mean"))


cross_entropy.c_row = _cross_entropy_row
cross_entropy_backward.c_row = _cross_entropy_backward_row
