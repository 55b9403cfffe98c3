"""Kernel time per op of one eager GPT example training step, in blocking mode.

    python benchmarks/kernel_profile.py [--steps N] [--top K]

Every kernel the VM runs is wrapped with a timer (keyed by op name and the shapes of its first
two inputs); the step runs inline (``vm.set_blocking(True)``) so the kernels' time is not mixed
with the caller's. Prints the step time, the kernels' share and the top kernels per step.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


from actorflow import vm  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    from benchmarks.bench_eager import GPT_CONFIG
    from benchmarks.bench_vm import _gpt

    stats: dict = collections.defaultdict(lambda: [0, 0.0])
    recording = [False]
    issue = vm.issue

    def timed_issue(fn, fargs, **kw):
        name = kw["name"]

        def kernel(*kargs):
            t0 = time.perf_counter()
            out = fn(*kargs)
            if recording[0]:
                key = (name, tuple(tuple(getattr(a, "shape", ())) for a in kargs[0][:2]))
                s = stats[key]
                s[0] += 1
                s[1] += time.perf_counter() - t0
            return out
        return issue(kernel, fargs, **kw)

    vm.issue = timed_issue
    vm.set_blocking(True)
    step, _ = _gpt(GPT_CONFIG)

    for _ in range(5):
        step().item()
    recording[0] = True
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step().item()
    per_step = (time.perf_counter() - t0) / args.steps
    kernels = sum(s[1] for s in stats.values()) / args.steps
    print(f"step {per_step * 1e3:.1f} ms, of which kernels {kernels * 1e3:.1f} ms "
          f"(GPT example b32 T64, 2 layers, d64, AdamW; blocking mode)\n")
    print("| ms/step | calls/step | op | input shapes |\n|---|---|---|---|")
    for (name, shapes), (n, t) in sorted(stats.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {t / args.steps * 1e3:.2f} | {n // args.steps} | {name} | {shapes} |")


if __name__ == "__main__":
    main()
