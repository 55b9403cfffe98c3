"""The GEMM floor of the MLP step: its eight matrix products alone, NumPy against PyTorch.

    python benchmarks/gemm_floor.py [--quick]

Issue #17's MLP (784-1024-1024-10, batch 256) spends most of a training step in eight GEMMs:
three forward (x W1^T, h1 W2^T, h2 W3^T), two input gradients and three weight gradients. This
tool times exactly those products on the step's shapes, with nothing else around them:

* NumPy (OpenBLAS) with its default thread count and with one thread (each in a child process,
  since OpenBLAS reads ``OPENBLAS_NUM_THREADS`` when it loads);
* the backward GEMMs on two Python threads with one BLAS thread each (what a second compute lane
  of the graph can do: each layer's input-gradient and weight-gradient products side by side);
* PyTorch with its default threads, when installed.

No step of the MLP, eager or graph, can take less than the NumPy figure with default threads;
the gap to a step's time is everything else (the update, activations, bias sums, the loss, the
runtime).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.common import quick_parser, race, table, torch, versions  # noqa: E402


def operands(seed: int = 0) -> dict:
    """The MLP's activations, weights and output gradient (float32)."""
    rng = np.random.default_rng(seed)
    f = np.float32
    a = {"x": rng.standard_normal((256, 784)).astype(f),
         "w1": rng.standard_normal((1024, 784)).astype(f),
         "w2": rng.standard_normal((1024, 1024)).astype(f),
         "w3": rng.standard_normal((10, 1024)).astype(f)}
    a["h1"] = np.maximum(a["x"] @ a["w1"].T, 0)
    a["h2"] = np.maximum(a["h1"] @ a["w2"].T, 0)
    a["g3"] = rng.standard_normal((256, 10)).astype(f)
    return a


def forward(a: dict, mm) -> None:
    """The three forward products."""
    h = mm(a["x"], a["w1"].T)
    h = mm(h, a["w2"].T)
    mm(h, a["w3"].T)


def backward(a: dict, mm) -> None:
    """The five backward products, one after another."""
    mm(a["g3"].T, a["h2"])
    g2 = mm(a["g3"], a["w3"])
    mm(g2.T, a["h1"])
    g1 = mm(g2, a["w2"])
    mm(g1.T, a["x"])


def backward_two_lanes(a: dict) -> None:
    """The backward products with each layer's weight gradient on a second thread."""
    def side(fn):
        t = threading.Thread(target=fn)
        t.start()
        return t

    t = side(lambda: a["g3"].T @ a["h2"])
    g2 = a["g3"] @ a["w3"]
    t.join()
    t = side(lambda: g2.T @ a["h1"])
    g1 = g2 @ a["w2"]
    t.join()
    g1.T @ a["x"]


def best_ms(runners: dict, quick: bool) -> dict:
    """{name: milliseconds per call} of ``runners`` (name -> function): ``common.race``'s
    fastest round, the runners taking turns."""
    min_time, rounds = (0.5, 5) if quick else (2.0, 10)
    return {k: s * 1e3 for k, s in race(runners, min_time, rounds).items()}


def numpy_figures(quick: bool) -> dict:
    """{name: ms} for this process's BLAS threads."""
    a = operands()
    runners = {"forward": lambda: forward(a, np.matmul),
               "backward": lambda: backward(a, np.matmul)}
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        runners["backward, two lanes"] = lambda: backward_two_lanes(a)
    return best_ms(runners, quick)


def child(blas_threads: str | None, quick: bool) -> dict:
    """``numpy_figures`` in a child process with ``OPENBLAS_NUM_THREADS`` set (or not)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    cmd = [sys.executable, __file__, "--child"] + (["--quick"] if quick else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(numpy_figures(args.quick)))
        return
    print(versions())
    rows = []
    for label, threads in (("NumPy, default BLAS threads", None), ("NumPy, one BLAS thread", "1")):
        r = child(threads, args.quick)
        rows.append((label, f"{r['forward']:.2f}", f"{r['backward']:.2f}",
                     f"{r['forward'] + r['backward']:.2f}"))
        if "backward, two lanes" in r:
            rows.append(("NumPy, one BLAS thread, backward on two lanes", f"{r['forward']:.2f}",
                         f"{r['backward, two lanes']:.2f}",
                         f"{r['forward'] + r['backward, two lanes']:.2f}"))
    if torch is not None:
        t = {k: torch.from_numpy(v) for k, v in operands().items()}
        with torch.no_grad():
            r = best_ms({"forward": lambda: forward(t, torch.matmul),
                         "backward": lambda: backward(t, torch.matmul)}, args.quick)
        fw, bw = r["forward"], r["backward"]
        rows.append((f"PyTorch, {torch.get_num_threads()} threads", f"{fw:.2f}", f"{bw:.2f}",
                     f"{fw + bw:.2f}"))
    print("\nThe MLP's eight GEMMs (784-1024-1024-10, batch 256, float32), ms per step\n")
    print(table(rows, ["runner", "forward (3)", "backward (5)", "all"]))


if __name__ == "__main__":
    main()
