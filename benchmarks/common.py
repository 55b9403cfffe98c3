"""Timing helpers shared by the benchmarks."""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

import numpy as np


def quick_parser(description: str | None = None) -> argparse.ArgumentParser:
    """An argument parser with the benchmarks' ``--quick`` flag (shorter timing rounds)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="shorter timing rounds")
    return p


def versions() -> str:
    """The lines a benchmark prints first: the NumPy and PyTorch versions and the CPU count,
    then the CPU flags."""
    return (f"numpy {np.__version__}; torch {torch.__version__ if torch else 'not installed'}; "
            f"{os.cpu_count()} cpus\n{cpu_flags()}\n")


def cpu_flags() -> str:
    """Which of the CPU features that NumPy's BLAS and PyTorch's kernels use are present."""
    flags: set = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "CPU flags: unknown (no /proc/cpuinfo)"
    amx = any(f.startswith("amx") for f in flags)
    return ("CPU flags: " + ", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in
                                      (("avx2", "avx2" in flags),
                                       ("avx512f", "avx512f" in flags), ("amx", amx))))


@contextlib.contextmanager
def env(var: str, value: str):
    """Environment variable ``var`` set to ``value`` inside the block, restored (or removed)
    after it."""
    old = os.environ.get(var)
    os.environ[var] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


def time_per_call(fn, *, min_time: float = 0.5, warmup: int = 3, repeat: int = 5,
                  sync=None) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` rounds of at least ``min_time`` s.

    ``sync`` (e.g. ``flow.synchronize``) is called at the end of each round, inside the timed
    region, so asynchronous work issued by the calls is counted."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    n = 1
    while True:  # calibrate how many calls fill min_time / repeat
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        dt = time.perf_counter() - t0
        if dt >= min_time / repeat or n >= 1 << 20:
            break
        n *= 2
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        rounds.append((time.perf_counter() - t0) / n)
    return statistics.median(rounds)


def race(runners: dict, min_time: float, rounds: int = 15, sync=None) -> dict:
    """Seconds per call of each runner (name -> zero-argument function): the fastest of
    ``rounds`` rounds, the runners taking turns round by round, so that load from elsewhere on
    a shared machine falls on all of them alike. ``sync`` (e.g. ``flow.synchronize``) runs
    after every call, inside the timing."""
    if sync is not None:
        runners = {name: (lambda f=fn: (f(), sync())) for name, fn in runners.items()}
    per_round = {}
    for name, fn in runners.items():
        fn()
        fn()  # warm up
        n = 1
        while n < 1 << 20:  # calibrate: calls per round of about min_time / rounds
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if time.perf_counter() - t0 >= min_time / rounds:
                break
            n *= 2
        per_round[name] = n
    best = {name: float("inf") for name in runners}
    for _ in range(rounds):
        for name, fn in runners.items():
            n = per_round[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return best


def table(rows, headers) -> str:
    """A GitHub-markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


try:
    import torch
    torch.set_num_threads(max(1, torch.get_num_threads()))
except ImportError:  # the benchmarks still run, without the PyTorch column
    torch = None
