"""Row kernels alone (issue #27): an op's NumPy kernel against its generated C row kernel
(``compiler/codegen/rows.py``, the op's ``c_row``), outside any graph, fastest of 200
calls (20 with ``--quick``) after a warm-up.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/row_codegen.py [--quick]

Cases: cross_entropy forward + backward (mean over int64 class-index targets, float32) at
(1024, 256) and at the GPT's (B*T, V) = (1024, 96); logsumexp, amax and max (values and
indices) over the last axis at (1024, 256). The generated kernels run on ``ops/parallel``'s
intra-op threads as in a graph.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import time  # noqa: E402

import numpy as np  # noqa: E402

import actorflow  # noqa: E402,F401  (registers the ops)
from actorflow.compiler.codegen import rows  # noqa: E402
from actorflow.framework import dtype as dt  # noqa: E402
from actorflow.ops import registry  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402

F32 = dt.float32


def _best_ms(fn, calls: int) -> float:
    fn()
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def _cross_entropy(shape):
    """[(op, attrs, ins, out metas)] of one cross_entropy forward and its backward."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, shape[1], shape[0])
    attrs = {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.0}
    prob = np.empty(shape, np.float32)
    registry.get("cross_entropy").kernel_cpu([x, y], [np.empty((), np.float32), prob], attrs)
    dout = np.ones((), np.float32)
    return [("cross_entropy", attrs, [x, y], [((), F32), (shape, F32)]),
            ("cross_entropy_backward", dict(attrs, needs=(True, False)), [dout, x, y, prob],
             [(shape, F32)])]


def _reduction(op, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if op == "max_dim":
        return [(op, {"dim": -1, "keepdim": False}, [x],
                 [(shape[:-1], F32), (shape[:-1], dt.int64)])]
    return [(op, {"dim": (-1,), "keepdim": False}, [x], [(shape[:-1], F32)])]


def _metas(arrays):
    return [(a.shape, dt.int64 if a.dtype.kind == "i" else F32) for a in arrays]


def time_case(calls_of: list, calls: int) -> tuple:
    """(NumPy ms, generated ms) of the calls ``calls_of`` run one after another."""
    kernels = rows.row_kernels_for([(op, attrs, _metas(ins), outs)
                                    for op, attrs, ins, outs in calls_of])
    if any(k is None for k in kernels):
        raise RuntimeError("no generated row kernel (no C compiler?)")
    outs = [[np.empty(s, d.np) for s, d in o] for *_, o in calls_of]

    def numpy_calls():
        for (op, attrs, ins, _), out in zip(calls_of, outs):
            registry.get(op).kernel_cpu(ins, out, attrs)

    def generated_calls():
        for k, (_, attrs, ins, _), out in zip(kernels, calls_of, outs):
            k(ins, out, attrs)
    return _best_ms(numpy_calls, calls), _best_ms(generated_calls, calls)


def main(argv=None) -> None:
    args = quick_parser(__doc__).parse_args(argv)
    calls = 20 if args.quick else 200
    cases = {"cross_entropy fwd+bwd (1024, 256)": _cross_entropy((1024, 256)),
             "cross_entropy fwd+bwd (1024, 96)": _cross_entropy((1024, 96))}
    for op in ("logsumexp", "amax", "max_dim"):
        cases[f"{op} (1024, 256)"] = _reduction(op, (1024, 256))
    rows_out = []
    for name, calls_of in cases.items():
        np_ms, c_ms = time_case(calls_of, calls)
        rows_out.append([name, f"{np_ms:.3f}", f"{c_ms:.3f}", f"{np_ms / c_ms:.1f}x"])
    print(versions())
    print(f"fastest of {calls} calls, float32")
    print(table(rows_out, ["case", "NumPy kernels (ms)", "generated C (ms)", "speed-up"]))


if __name__ == "__main__":
    main()
