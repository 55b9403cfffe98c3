"""The GEMM floor of a step: its matrix products alone, NumPy against PyTorch.

    python benchmarks/gemm_floor.py [--quick] [--model mlp|gpt]

``--model gpt``: the GPT step's 75 GEMMs (graph_profile.GPT; see ``GPT_LINEARS``), split into
the linears' and attention's batched products, NumPy (default and one BLAS thread) against
torch.matmul on the same operands.

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


# --- the GPT step (--model gpt) ------------------------------------------------------------
# graph_profile.GPT: 4 layers, d128, 4 heads, T64, batch 16, vocab 96, tied head. Each block
# has four linears (qkv 128->384, proj 128->128, fc1 128->512, fc2 512->128) and attention's
# two batched forward products and four batched backward products over (64 = batch x heads)
# (64, 32) heads; the head is one more linear (128->96, the embedding's weight).
GPT_LINEARS = (("qkv", 128, 384), ("proj", 128, 128), ("fc1", 128, 512), ("fc2", 512, 128))
GPT_LAYERS, GPT_ROWS, GPT_BH, GPT_T, GPT_HD, GPT_VOCAB = 4, 16 * 64, 16 * 4, 64, 32, 96


def gpt_operands(seed: int = 0) -> dict:
    """One set of the GPT step's GEMM operands (float32); the layers reuse it (same shapes)."""
    rng = np.random.default_rng(seed)
    f = np.float32
    a = {}
    for name, fin, fout in GPT_LINEARS + (("head", 128, GPT_VOCAB),):
        a[name + ".x"] = rng.standard_normal((GPT_ROWS, fin)).astype(f)
        a[name + ".w"] = rng.standard_normal((fout, fin)).astype(f)
        a[name + ".g"] = rng.standard_normal((GPT_ROWS, fout)).astype(f)
    for n in ("q", "k", "v", "dout"):
        a[n] = rng.standard_normal((GPT_BH, GPT_T, GPT_HD)).astype(f)
    for n in ("p", "ds"):
        a[n] = rng.standard_normal((GPT_BH, GPT_T, GPT_T)).astype(f)
    return a


def gpt_linear(a: dict, mm, names) -> None:
    """Each linear's forward (x W^T), input gradient (g W) and weight gradient (g^T x)."""
    for n in names:
        x, w, g = a[n + ".x"], a[n + ".w"], a[n + ".g"]
        mm(x, w.T)
        mm(g, w)
        mm(g.T, x)


def gpt_attention(a: dict, mm) -> None:
    """Attention's batched products: q k^T, p v; dp = dout v^T, dv = p^T dout, dq = ds k,
    dk = ds^T q (transposes as views, as the kernels pass them)."""
    q, k, v, p, ds, do = a["q"], a["k"], a["v"], a["p"], a["ds"], a["dout"]
    tr = (lambda t: t.transpose(0, 2, 1)) if isinstance(q, np.ndarray) else \
        (lambda t: t.transpose(1, 2))
    mm(q, tr(k))
    mm(p, v)
    mm(do, tr(v))
    mm(tr(p), do)
    mm(ds, k)
    mm(tr(ds), q)


def gpt_runners(a: dict, mm) -> dict:
    """{part: function} timing one step's worth of each kind of GEMM."""
    def linears():
        for _ in range(GPT_LAYERS):
            gpt_linear(a, mm, [n for n, _, _ in GPT_LINEARS])
        gpt_linear(a, mm, ["head"])

    def attention():
        for _ in range(GPT_LAYERS):
            gpt_attention(a, mm)
    return {"linears": linears, "attention": attention}


def best_ms(runners: dict, quick: bool) -> dict:
    """{name: milliseconds per call} of ``runners`` (name -> function): ``common.race``'s
    fastest round, the runners taking turns."""
    min_time, rounds = (0.5, 5) if quick else (2.0, 10)
    return {k: s * 1e3 for k, s in race(runners, min_time, rounds).items()}


def numpy_figures(quick: bool, model: str = "mlp") -> dict:
    """{name: ms} for this process's BLAS threads."""
    if model == "gpt":
        return best_ms(gpt_runners(gpt_operands(), np.matmul), quick)
    a = operands()
    runners = {"forward": lambda: forward(a, np.matmul),
               "backward": lambda: backward(a, np.matmul)}
    if os.environ.get("OPENBLAS_NUM_THREADS") == "1":
        runners["backward, two lanes"] = lambda: backward_two_lanes(a)
    return best_ms(runners, quick)


def child(blas_threads: str | None, quick: bool, model: str = "mlp") -> dict:
    """``numpy_figures`` in a child process with ``OPENBLAS_NUM_THREADS`` set (or not)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    cmd = [sys.executable, __file__, "--child", "--model", model] + (["--quick"] if quick else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = quick_parser(__doc__.split("\n\n")[0])
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", choices=("mlp", "gpt"), default="mlp",
                   help="whose step's GEMMs: the MLP's eight or the GPT's 75")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(numpy_figures(args.quick, args.model)))
        return
    print(versions())
    if args.model == "gpt":
        gpt_main(args.quick)
        return
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


def gpt_main(quick: bool) -> None:
    """The GPT step's GEMMs: NumPy (default and one BLAS thread) against torch.matmul."""
    rows = []
    for label, threads in (("NumPy, default BLAS threads", None), ("NumPy, one BLAS thread", "1")):
        r = child(threads, quick, "gpt")
        rows.append((label, f"{r['linears']:.2f}", f"{r['attention']:.2f}",
                     f"{r['linears'] + r['attention']:.2f}"))
    if torch is not None:
        t = {k: torch.from_numpy(v) for k, v in gpt_operands().items()}
        with torch.no_grad():
            r = best_ms(gpt_runners(t, torch.matmul), quick)
        rows.append((f"PyTorch, {torch.get_num_threads()} threads", f"{r['linears']:.2f}",
                     f"{r['attention']:.2f}", f"{r['linears'] + r['attention']:.2f}"))
    print("\nThe GPT step's GEMMs (4 layers, d128, T64, b16, 4 heads, vocab 96, float32), "
          "ms per step\n")
    print(table(rows, ["runner", "linears (51: x W^T, g W, g^T x)",
                       "attention (24 batched, 64 heads)", "all"]))


if __name__ == "__main__":
    main()
