"""nn.Graph benchmarks: compile time against graph size, and training-step time.

    python benchmarks/bench_graph.py [--quick]

(1) Compile time (trace ``build`` + passes + executor construction), measured as the first
call's time minus a later call's (which only runs), for a chain of N adds (N = 100, 1,000,
10,000) and for a training graph of the GPT example (forward, backward, AdamW) with growing
depth; printed with the op counts, CPU microseconds and Python function calls (counted with
cProfile: work that other load on the machine can't disturb) per traced op, and the fitted
exponent k of ``time ~ ops^k`` (k = 1: linear). Compile times are the smallest of a few fresh
compiles.

(2) Milliseconds per training step of an MLP 784-1024-1024-10 (batch 256, SGD) and of the GPT
example (AdamW) as an nn.Graph, against actorflow eager, PyTorch eager and (MLP) a hand-written
NumPy step, all in the same run. The runners of one model take turns round by round and each
gets its fastest round, so that load from elsewhere on a shared machine falls on all alike.

Every timed call ends with ``flow.synchronize()`` (eager ops and graph calls may run
asynchronously on the eager VM), as a training loop that reads its loss every step does. Graphs
run on the reference executor (``ACTORFLOW_RUN_GRAPH_BY_VM=1``) and, where it exists
(``actorflow.runtime``), on the actor runtime, whose compile time adds Job -> Plan compilation,
the memory plan and starting the runtime.
"""
from __future__ import annotations

import functools
import gc
import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from benchmarks.bench_eager import (GPT_ADAMW, GPT_CONFIG, af_gpt,  # noqa: E402
                                    af_mlp, eager_step, gpt_data, gpt_loss, mlp_data, mlp_loss,
                                    mlp_numpy_params, mlp_numpy_step, torch_gpt_step,
                                    torch_mlp_step)
from benchmarks.common import env, quick_parser, race as _race, table, torch, versions  # noqa: E402

nn = flow.nn
HAS_RUNTIME = importlib.util.find_spec("actorflow.runtime") is not None
# eager ops and graph calls may run asynchronously (the eager VM); every timed call ends with a
# sync point, as a training loop that reads its loss each step does
sync = getattr(flow, "synchronize", lambda: None)


def race(runners: dict, min_time: float, rounds: int = 15) -> dict:
    """``common.race`` with every call followed by ``flow.synchronize()``."""
    return _race(runners, min_time, rounds, sync=sync)
EXECUTORS = ("reference", "runtime") if HAS_RUNTIME else ("reference",)


def executor(kind: str):
    """A context in which graphs compiled run on the reference executor or on the actor
    runtime."""
    return env("ACTORFLOW_RUN_GRAPH_BY_VM", "1" if kind == "reference" else "0")


# ---- (1) compile time ----------------------------------------------------------------------------

def compile_seconds(make_graph, args, repeat: int) -> tuple:
    """``(ops traced, ops after passes, wall seconds, CPU seconds)`` of compiling (trace +
    passes + executor construction): the fastest first call of ``repeat`` fresh graphs minus
    the fastest of their later calls (each fastest time is the one other load on a shared
    machine disturbed least). CPU seconds are this process's. The garbage collector is paused
    while timing, as ``timeit`` does."""
    first = first_cpu = run = run_cpu = float("inf")
    for _ in range(repeat):
        g = make_graph()
        gc.collect()
        gc.disable()
        try:
            for i in range(4):
                t0, c0 = time.perf_counter(), time.process_time()
                g(*args)
                sync()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if i == 0:
                    first, first_cpu = min(first, wall), min(first_cpu, cpu)
                else:
                    run, run_cpu = min(run, wall), min(run_cpu, cpu)
        finally:
            gc.enable()
        counts = len(g.forward_job.ops), len(g.full_job.ops)
        close_graphs([g])  # a graph on the actor runtime stops its threads
        g = None
    return (*counts, first - run, first_cpu - run_cpu)


def compile_calls(make_graph, args) -> int:
    """Python function calls made by compiling (first call - a later call), counted with
    cProfile: a measure of the work that no other load on the machine can disturb."""
    import cProfile
    import pstats

    g = make_graph()
    counts = []
    for _ in range(2):
        prof = cProfile.Profile()
        prof.enable()
        g(*args)
        sync()
        prof.disable()
        counts.append(pstats.Stats(prof).total_calls)
    close_graphs([g])
    return counts[0] - counts[1]


def add_chain_graph(n: int):
    class AddChain(nn.Graph):
        def build(self, x, y):
            for _ in range(n):
                x = x + y
            return x
    return AddChain()


def gpt_train_graph(n_layer: int, vocab: int = 96, block: int = 64, embd: int = 64,
                    heads: int = 4, dropout: float = 0.0):
    """A training graph of the GPT example: model, loss, backward and AdamW."""
    from examples.gpt import GPT

    model = GPT(vocab, block, n_layer, heads, embd, dropout)
    opt = flow.optim.AdamW(model.parameters(), lr=1e-3)

    class GPTTrain(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            _, loss = self.model(x, y)
            loss.backward()
            return loss
    return GPTTrain()


def exponent(rows, col: int = 3) -> float:
    """Least-squares slope of log(column ``col``: CPU seconds, or 5: Python calls) against
    log(ops traced)."""
    ops = np.log([r[0] for r in rows])
    sec = np.log([r[col] for r in rows])
    return float(np.polyfit(ops, sec, 1)[0])


def compile_times(quick: bool, kind: str):
    """Rows ``(ops traced, ops after passes, wall s, CPU s, name, Python calls)`` for executor
    ``kind``."""
    x, y = flow.randn(4), flow.randn(4)
    rng = np.random.default_rng(0)
    idx = flow.from_numpy(rng.integers(0, 96, (2, 16)))
    tgt = flow.from_numpy(rng.integers(0, 96, (2, 16)))
    with executor(kind):
        # warm up (imports, first-use caches) so the first measured graph pays no one-off costs
        compile_seconds(lambda: add_chain_graph(10), (x, y), 1)
        compile_seconds(lambda: gpt_train_graph(1), (idx, tgt), 1)
        chain = []
        for n in (100, 1000, 10000):
            repeat = 1 if n >= 10000 else (2 if quick else 3)
            make = functools.partial(add_chain_graph, n)
            chain.append((*compile_seconds(make, (x, y), repeat), f"chain of {n:,} adds",
                          compile_calls(make, (x, y))))
        gpt = []
        for layers in (1, 2, 4, 8, 16):
            flow.manual_seed(0)
            make = functools.partial(gpt_train_graph, layers)
            gpt.append((*compile_seconds(make, (idx, tgt), 1 if quick else 3),
                        f"GPT train step, {layers} layer{'s' if layers > 1 else ''}",
                        compile_calls(make, (idx, tgt))))
    return chain, gpt


def compile_table(results: dict) -> str:
    """One row per graph; wall and CPU milliseconds per executor kind."""
    kinds = list(results)
    first = results[kinds[0]]
    rows = []
    for i, (traced, full, _, _, name, _) in enumerate(first):
        row = [name, f"{traced:,}", f"{full:,}"]
        for k in kinds:
            _, _, wall, cpu, _, calls = results[k][i]
            row += [f"{wall * 1e3:.1f}", f"{cpu * 1e3:.1f}", f"{cpu / traced * 1e6:.0f}",
                    f"{calls / traced:.0f}"]
        rows.append(row)
    headers = ["graph", "ops traced", "ops after passes"]
    for k in kinds:
        headers += [f"{k}: ms (wall)", f"{k}: ms (CPU)", f"{k}: CPU µs/op",
                    f"{k}: Python calls/op"]
    return table(rows, headers)


# ---- (2) step time -------------------------------------------------------------------------------

def train_graph(model, opt, loss_fn):
    class Train(nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = loss_fn(self.model, x, y)
            loss.backward()
            return loss
    return Train()


_RUNNER = {"reference": "actorflow nn.Graph, reference executor",
           "runtime": "actorflow nn.Graph, actor runtime"}


def add_graph_runners(runners: dict, make_graph, args) -> list:
    """Add a training graph per executor to ``runners`` (compiled here, outside the timing);
    returns the graphs (close them after timing)."""
    graphs = []
    for kind in EXECUTORS:
        with executor(kind):
            g = make_graph()
            g(*args)
        runners[_RUNNER[kind]] = lambda g=g: g(*args)
        graphs.append(g)
    return graphs


def close_graphs(graphs: list) -> None:
    for g in graphs:
        close = getattr(g, "close", None)
        if close is not None:
            close()
    graphs.clear()
    gc.collect()


def mlp_steps(min_time: float) -> tuple:
    x, y = mlp_data()
    params_np = mlp_numpy_params()
    fx, fy = flow.from_numpy(x), flow.from_numpy(y)
    runners = {"NumPy (hand-written)": lambda: mlp_numpy_step(params_np, x, y, 0.01),
               "actorflow eager": eager_step(*af_mlp(), mlp_loss, fx, fy)}
    graphs = add_graph_runners(runners, lambda: train_graph(*af_mlp(), mlp_loss), (fx, fy))
    ops = len(graphs[0].full_job.ops)
    if torch is not None:
        runners["PyTorch eager"] = torch_mlp_step(x, y)
    res = race(runners, min_time * len(runners))
    close_graphs(graphs)
    return res, ops


def gpt_steps(min_time: float, cfg: dict) -> tuple:
    from benchmarks.numpy_gpt import NumpyGPT

    x, y = gpt_data(cfg)
    fx, fy = flow.from_numpy(x), flow.from_numpy(y)
    ng = NumpyGPT.from_state_dict(af_gpt(cfg)[0].state_dict(), cfg["heads"], **GPT_ADAMW)
    runners = {"NumPy (hand-written)": lambda: ng.step(x, y),
               "actorflow eager": eager_step(*af_gpt(cfg), gpt_loss, fx, fy)}
    graphs = add_graph_runners(runners, lambda: train_graph(*af_gpt(cfg), gpt_loss), (fx, fy))
    ops = len(graphs[0].full_job.ops)
    if torch is not None:
        runners["PyTorch eager"] = torch_gpt_step(cfg, x, y)
    res = race(runners, min_time * len(runners))
    close_graphs(graphs)
    return res, ops


def step_rows(model: str, res: dict) -> list:
    eager = res["actorflow eager"]
    ref_t = res.get("PyTorch eager")
    ref_np = res.get("NumPy (hand-written)")
    rows = []
    for k, v in res.items():
        rows.append((model, k, f"{v * 1e3:.2f}", f"{v / eager:.2f}x",
                     f"{v / ref_t:.2f}x" if ref_t else "-",
                     f"{v / ref_np:.2f}x" if ref_np else "-"))
    return rows


def main(argv=None):
    args = quick_parser().parse_args(argv)
    min_time = 0.3 if args.quick else 1.0
    print(versions())
    print("## (1) compile time (trace + passes + executor; first call - a later call)\n")
    results, fits = {}, []
    for kind in EXECUTORS:
        chain, gpt = compile_times(args.quick, kind)
        results[kind] = chain + gpt
        fits.append(f"{kind}: chain of adds {exponent(chain):.2f} ({exponent(chain, 5):.2f}), "
                    f"GPT by depth {exponent(gpt):.2f} ({exponent(gpt, 5):.2f})")
    print(compile_table(results))
    print("\nfitted exponent k of CPU time ~ (ops traced)^k (of Python calls in brackets): "
          + "; ".join(fits))
    print("\n## (2) training step time\n")
    rows = []
    mlp, mlp_ops = mlp_steps(min_time)
    rows += step_rows(f"MLP 784-1024-1024-10, b256, SGD ({mlp_ops} ops)", mlp)
    cfg = GPT_CONFIG
    gpt_res, gpt_ops = gpt_steps(min_time, cfg)
    rows += step_rows(f"GPT example (b{cfg['batch']}, T{cfg['block']}, {cfg['layers']} layers, "
                      f"d{cfg['embd']}), AdamW ({gpt_ops} ops)", gpt_res)
    print(table(rows, ["model", "runner", "ms/step", "vs eager", "vs PyTorch", "vs NumPy"]))


if __name__ == "__main__":
    main()
