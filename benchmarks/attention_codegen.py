"""Fused attention alone (issue #27): the NumPy kernels of scaled_dot_product_attention and its
gradient against their generated C row kernels (``ops/attention_rows.py``, one (batch, head)
block per row), outside any graph, fastest of 200 calls (20 with ``--quick``) after a warm-up.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/attention_codegen.py [--quick]

Cases: the benchmark GPT's attention (batch 16, 4 heads, T 64, head dim 32), causal and not,
float32 (and float64 causal), forward and backward. The generated kernels run on
C pool's threads as in a graph. Graphs use both forms unless
``ACTORFLOW_GRAPH_CODEGEN_ATTENTION=0``; this script switches them on for itself.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import actorflow  # noqa: E402,F401  (registers the ops)
from actorflow.compiler.codegen import rows  # noqa: E402
from actorflow.framework import dtype as dt  # noqa: E402
from actorflow.ops import attention_rows, registry  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402
from benchmarks.row_codegen import _best_ms  # noqa: E402

FWD = "scaled_dot_product_attention"
BWD = FWD + "_grad"


def _cases(shape: tuple, causal: bool, np_dtype) -> list:
    """[(op, attrs, ins, outs)] of one forward and one backward call at ``shape`` (B, H, T, E)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape).astype(np_dtype) for _ in range(3))
    B, H, T, _ = shape
    attrs = {"scale": shape[-1] ** -0.5, "is_causal": causal}
    out, probs = np.empty(shape, np_dtype), np.empty((B, H, T, T), np_dtype)
    registry.get(FWD).kernel_cpu([q, k, v], [out, probs], attrs)
    dout = rng.standard_normal(shape).astype(np_dtype)
    gattrs = {"scale": attrs["scale"], "needs": (True, True, True), "has_dprobs": False,
              "mask_shape": None}
    return [(FWD, attrs, [q, k, v], [out.copy(), probs.copy()]),
            (BWD, gattrs, [dout, q, k, v, probs, out], [np.empty_like(a) for a in (q, k, v)])]


def time_call(op: str, attrs: dict, ins: list, outs: list, calls: int) -> tuple:
    """(NumPy ms, generated ms) of one call."""
    d = dt.float32 if ins[0].dtype == np.float32 else dt.float64
    kernel, = rows.row_kernels_for([(op, attrs, [(a.shape, d) for a in ins],
                                     [(a.shape, d) for a in outs])])
    if kernel is None:
        raise RuntimeError("no generated attention kernel (no C compiler?)")
    numpy_kernel = registry.get(op).kernel_cpu
    return (_best_ms(lambda: numpy_kernel(ins, outs, attrs), calls),
            _best_ms(lambda: kernel(ins, outs, attrs), calls))


def main(argv=None) -> None:
    args = quick_parser(__doc__).parse_args(argv)
    os.environ[attention_rows.ENV] = "1"  # every form, whatever the default (attention_rows)
    calls = 20 if args.quick else 200
    shape = (16, 4, 64, 32)
    rows_out = []
    for causal, np_dtype in ((True, np.float32), (False, np.float32), (True, np.float64)):
        for op, attrs, ins, outs in _cases(shape, causal, np_dtype):
            np_ms, c_ms = time_call(op, attrs, ins, outs, calls)
            name = f"{'bwd' if op == BWD else 'fwd'} {np.dtype(np_dtype).name}" \
                   f"{' causal' if causal else ''}"
            rows_out.append([name, f"{np_ms:.3f}", f"{c_ms:.3f}", f"{np_ms / c_ms:.2f}x"])
    print(versions())
    print(f"fastest of {calls} calls, (B, H, T, E) = {shape}, load average "
          f"{os.getloadavg()[0]:.2f}")
    print(table(rows_out, ["case", "NumPy kernel (ms)", "generated C (ms)", "speed-up"]))


if __name__ == "__main__":
    main()
