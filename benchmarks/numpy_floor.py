"""What NumPy itself costs on this machine, next to PyTorch: the floor under actorflow's kernels.

    python benchmarks/numpy_floor.py [--quick]

Prints (1) nanoseconds per float32 element for NumPy's transcendental functions and for a
plain arithmetic pass, with PyTorch's exp for comparison, and which SIMD extensions NumPy found;
(2) the GPT example's elementwise kernels (GELU forward/backward, layer norm forward/backward)
and its GEMM shape, actorflow's kernel called directly against PyTorch's op on the same inputs.
Each figure is the median of five timed rounds (``benchmarks.common.time_per_call``).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.common import quick_parser, time_per_call, versions  # noqa: E402


def us(fn, min_time: float) -> float:
    """Microseconds per call of ``fn``."""
    return time_per_call(fn, min_time=min_time) * 1e6


def simd_found() -> str:
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return "unknown"
    found = [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]
    return ", ".join(found) or "none beyond the baseline"


def elementwise_costs(min_time: float, torch) -> None:
    n = 1 << 16
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    pos = np.abs(x) + np.float32(0.1)
    out = np.empty_like(x)
    print(f"NumPy dispatch targets found on this CPU: {simd_found()}\n")
    print("| float32, 65536 elements | ns per element |")
    print("|---|---|")
    rows = [("multiply (one arithmetic pass)", lambda: np.multiply(x, x, out=out)),
            ("np.exp", lambda: np.exp(x, out=out)),
            ("np.log", lambda: np.log(pos, out=out)),
            ("np.tanh", lambda: np.tanh(x, out=out))]
    if torch is not None:
        tx, tout = torch.from_numpy(x), torch.from_numpy(out)
        rows.append(("torch.exp (one thread)", lambda: torch.exp(tx, out=tout)))
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    for name, fn in rows:
        print(f"| {name} | {us(fn, min_time) * 1e3 / n:.2f} |")
    if torch is not None:
        torch.set_num_threads(threads)


def kernel_costs(min_time: float, torch) -> None:
    from actorflow.ops.gelu_f32 import gelu_f32, gelu_grad_f32
    from actorflow.ops.registry import get

    rng = np.random.default_rng(0)
    u = rng.standard_normal((2048, 256)).astype(np.float32)
    g = rng.standard_normal((2048, 256)).astype(np.float32)
    y, cdf, du = np.empty_like(u), np.empty_like(u), np.empty_like(u)
    x = rng.standard_normal((32, 64, 64)).astype(np.float32)
    w, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    ln_out = [np.empty_like(x), np.empty((32, 64, 1), np.float32),
              np.empty((32, 64, 1), np.float32)]
    ln_grad_out = [np.empty_like(x), np.empty(64, np.float32), np.empty(64, np.float32)]
    attrs = {"normalized_ndim": 1, "normalized_shape": (64,), "eps": 1e-5, "has_weight": True,
             "has_bias": True}
    ln, ln_grad = get("layer_norm").kernel_cpu, get("layer_norm_grad").kernel_cpu
    a, wt = rng.standard_normal((2048, 64)).astype(np.float32), \
        rng.standard_normal((64, 256)).astype(np.float32)
    gemm_out = np.empty((2048, 256), np.float32)
    gelu_f32(u, y, "none", cdf)

    def ln_both():
        ln([x, w, b], ln_out, attrs)
        ln_grad([x, x, ln_out[1], ln_out[2], w], ln_grad_out, attrs)

    ours = {
        "gelu forward (2048x256), saving Phi": lambda: gelu_f32(u, y, "none", cdf),
        "gelu backward (2048x256), from Phi": lambda: gelu_grad_f32(g, u, du, "none", cdf),
        "layer_norm forward (2048x64)": lambda: ln([x, w, b], ln_out, attrs),
        "layer_norm forward + backward (2048x64)": ln_both,
        "GEMM (2048x64) @ (64x256)": lambda: np.matmul(a, wt, out=gemm_out),
    }
    theirs = {}
    if torch is not None:
        F = torch.nn.functional
        tu = torch.from_numpy(u).requires_grad_()
        tg = torch.from_numpy(g)
        tx = torch.from_numpy(x).requires_grad_()
        tw, tb = torch.from_numpy(w).requires_grad_(), torch.from_numpy(b).requires_grad_()
        ta, twt = torch.from_numpy(a), torch.from_numpy(wt)
        gy = torch.from_numpy(np.ones_like(x))
        theirs = {
            "gelu forward (2048x256), saving Phi": lambda: F.gelu(tu.detach()),
            "gelu backward (2048x256), from Phi": lambda: torch.ops.aten.gelu_backward(tg, tu),
            "layer_norm forward (2048x64)": lambda: F.layer_norm(tx.detach(), (64,), tw.detach(),
                                                                 tb.detach()),
            "layer_norm forward + backward (2048x64)": lambda: torch.autograd.grad(
                F.layer_norm(tx, (64,), tw, tb), (tx, tw, tb), gy),
            "GEMM (2048x64) @ (64x256)": lambda: ta @ twt,
        }
    print("\n| kernel | actorflow µs | PyTorch µs | ratio |")
    print("|---|---|---|---|")
    for name, fn in ours.items():
        mine = us(fn, min_time)
        if name in theirs:
            ref = us(theirs[name], min_time)
            print(f"| {name} | {mine:.0f} | {ref:.0f} | {mine / ref:.2f}x |")
        else:
            print(f"| {name} | {mine:.0f} | - | - |")


def main(argv=None) -> None:
    args = quick_parser(__doc__).parse_args(argv)
    min_time = 0.1 if args.quick else 0.5
    try:
        import torch
    except ImportError:
        torch = None
    print(versions())
    elementwise_costs(min_time, torch)
    kernel_costs(min_time, torch)


if __name__ == "__main__":
    main()
