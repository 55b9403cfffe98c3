"""Eager VM benchmarks: asynchronous vs blocking execution, dispatch cost, worker threads.

    python benchmarks/bench_vm.py [--quick]

(1) ms per training step of the MLP 784-1024-1024-10 (batch 256, SGD) and of the GPT example
(examples/gpt.py, batch 32, block 64, 2 layers, 4 heads, d 64, AdamW) for actorflow in async
mode, actorflow in blocking mode (ACTORFLOW_EAGER_BLOCKING semantics, switched with
``vm.set_blocking``) and PyTorch eager; two loops each: "pipelined" issues N steps and
synchronizes once, "loss.item() each step" syncs every step as a training loop that logs does.
(2) µs per op of async dispatch: what the calling thread spends per op while the worker is busy
(so nothing runs inline), and the end-to-end cost per tiny op in each mode.
(3) two independent chains of matmuls on one worker vs on two workers
(``flow.asyncs.Thread``), with BLAS at one thread and at its default (each in a subprocess, as
BLAS reads its thread count at start).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from actorflow import vm  # noqa: E402
from benchmarks.bench_eager import (GPT_CONFIG, af_gpt, af_mlp, eager_step,  # noqa: E402
                                    gpt_data, gpt_loss, mlp_data, mlp_loss, torch_gpt_step,
                                    torch_mlp_step)
from benchmarks.common import quick_parser, table, torch, versions  # noqa: E402

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _median_time(run, rounds: int) -> float:
    """Median over ``rounds`` of ``run()`` (which returns seconds per step)."""
    return statistics.median(run() for _ in range(rounds))


# ---- (1) training steps -----------------------------------------------------------------------

def _mlp():
    x, y = mlp_data()
    step = eager_step(*af_mlp(), mlp_loss, flow.from_numpy(x), flow.from_numpy(y))
    return step, (torch_mlp_step(x, y) if torch is not None else None)


def _gpt(cfg):
    x, y = gpt_data(cfg)
    step = eager_step(*af_gpt(cfg), gpt_loss, flow.from_numpy(x), flow.from_numpy(y))
    return step, (torch_gpt_step(cfg, x, y) if torch is not None else None)


def _per_step(step, n: int, sync_each: bool) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        loss = step()
        if sync_each:
            loss.item()
    flow.synchronize()
    return (time.perf_counter() - t0) / n


def training_steps(quick: bool) -> str:
    n, rounds = (4, 3) if quick else (8, 5)
    gcfg = GPT_CONFIG
    rows = []
    for label, (step, tstep) in [("MLP 784-1024-1024-10, b256, SGD", _mlp()),
                                 ("GPT example (b32, T64, 2 layers, d64), AdamW", _gpt(gcfg))]:
        for loop, sync_each in (("pipelined", False), ("loss.item() each step", True)):
            res = {}
            for _ in range(rounds):  # interleave the modes so machine noise hits both alike
                for mode, blocking in (("async", False), ("blocking", True)):
                    vm.set_blocking(blocking)
                    _per_step(step, 2, sync_each)
                    res.setdefault(mode, []).append(_per_step(step, n, sync_each))
            vm.set_blocking(False)
            a, b = statistics.median(res["async"]), statistics.median(res["blocking"])
            t = float("nan")
            if tstep is not None:
                t = _median_time(lambda f=tstep, s=sync_each: _torch_per_step(f, n, s), rounds)
            rows.append((label, loop, f"{a * 1e3:.1f}", f"{b * 1e3:.1f}", f"{b / a:.2f}x",
                         f"{t * 1e3:.1f}", f"{a / t:.2f}x"))
    return table(rows, ["model", "loop", "async ms/step", "blocking ms/step",
                        "async speed-up", "PyTorch ms/step", "async vs PyTorch"])


def _torch_per_step(tstep, n, sync_each):
    t0 = time.perf_counter()
    for _ in range(n):
        loss = tstep()
        if sync_each:
            loss.item()
    return (time.perf_counter() - t0) / n


# ---- (2) dispatch ------------------------------------------------------------------------------

def dispatch_cost(quick: bool) -> str:
    n = 1000  # below the VM's queue bound, so the issuing thread never waits
    rounds = 3 if quick else 7
    a, b = flow.randn(8, 8), flow.randn(8, 8)
    cases = [("add 8x8", lambda: a + b), ("matmul 8x8", lambda: flow.matmul(a, b)),
             ("relu 8x8", lambda: flow.relu(a))]
    rows = []
    for name, fn in cases:
        issue = []
        for _ in range(rounds):  # the worker is held by a gate: every op is queued
            gate = threading.Event()
            vm.launch(gate.wait, name="gate")
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            issue.append((time.perf_counter() - t0) / n)
            gate.set()
            flow.synchronize()
        e2e = {}
        for mode, blocking in (("async", False), ("blocking", True)):
            vm.set_blocking(blocking)
            e2e[mode] = _median_time(lambda f=fn: _tiny_e2e(f, n), rounds)
        vm.set_blocking(False)
        rows.append((name, f"{statistics.median(issue) * 1e6:.1f}",
                     f"{e2e['async'] * 1e6:.1f}", f"{e2e['blocking'] * 1e6:.1f}"))
    return table(rows, ["op", "async dispatch µs/op (worker busy)",
                        "async end-to-end µs/op", "blocking µs/op"])


def _tiny_e2e(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    flow.synchronize()
    return (time.perf_counter() - t0) / n


# ---- (3) two matmul chains -----------------------------------------------------------------------

def _chains(quick: bool) -> dict:
    """Runs in a child process (BLAS thread count fixed by its environment)."""
    size, length = 384, 12 if quick else 24
    rounds = 3 if quick else 5
    rng = np.random.default_rng(0)
    ms = [flow.tensor(rng.standard_normal((size, size)).astype(np.float32) / size ** 0.5)
          for _ in range(2)]

    def chain(x, w):
        for _ in range(length):
            x = flow.matmul(x, w)
        return x

    t1, t2 = flow.asyncs.Thread(), flow.asyncs.Thread()

    def one_worker():
        t0 = time.perf_counter()
        with flow.asyncs.thread(t1):
            chain(ms[0], ms[1])
            chain(ms[1], ms[0])
        flow.synchronize()
        return time.perf_counter() - t0

    def two_workers():
        t0 = time.perf_counter()
        with flow.asyncs.thread(t1):
            chain(ms[0], ms[1])
        with flow.asyncs.thread(t2):
            chain(ms[1], ms[0])
        flow.synchronize()
        return time.perf_counter() - t0

    one_worker(), two_workers()
    one, two = [], []
    for _ in range(rounds):
        one.append(one_worker())
        two.append(two_workers())
    return {"one": statistics.median(one), "two": statistics.median(two), "size": size,
            "length": length}


def matmul_chains(quick: bool) -> str:
    rows = []
    for label, blas in (("1 thread", "1"), ("default", None)):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_VARS}
        if blas:
            env.update({k: blas for k in BLAS_VARS})
        cmd = [sys.executable, os.path.abspath(__file__), "--chains-child"]
        if quick:
            cmd.append("--quick")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((f"BLAS {label}", f"2 x {r['length']} matmuls {r['size']}x{r['size']}",
                     f"{r['one'] * 1e3:.1f}", f"{r['two'] * 1e3:.1f}",
                     f"{r['one'] / r['two']:.2f}x"))
    return table(rows, ["BLAS threads", "work", "one worker ms", "two workers ms", "speed-up"])


def main(argv=None):
    p = quick_parser()
    p.add_argument("--chains-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.chains_child:
        print(json.dumps(_chains(args.quick)))
        return
    print(versions())
    print("## (1) training step time, async vs blocking\n")
    print(training_steps(args.quick))
    print("\n## (2) dispatch cost per op, tiny tensors\n")
    print(dispatch_cost(args.quick))
    print("\n## (3) two independent matmul chains: one worker vs two\n")
    print(matmul_chains(args.quick))


if __name__ == "__main__":
    main()
