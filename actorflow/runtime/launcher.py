"""RuntimeExecutor: runs a Job on the actor runtime with the same interface as the reference
executor (``run(inputs, bindings) -> outputs``), plus ``launch`` for calls that don't wait.

It compiles the Job into a Plan once, starts a Runtime on first use (and again after a failure
tore the previous one down), draws each call's random seeds on the caller's thread in the order
eager code would draw them, and closes its runtime when it is closed, garbage-collected or the
interpreter exits.
"""
from __future__ import annotations

import atexit
import weakref

from actorflow.compiler import CompileOptions, compile_job
from actorflow.job.executor import stage_of
from actorflow.job.job import SYSTEM_OPS
from actorflow.ops import registry
from actorflow.random import default_generator
from actorflow.runtime.runtime import Runtime

_live: "weakref.WeakSet[RuntimeExecutor]" = weakref.WeakSet()


def random_ops_in_draw_order(job) -> tuple:
    """``(pre, micro, post)`` lists of the random ops whose seeds each call draws (clones that
    reuse another op's seed are left out), each in Job order."""
    n = int(job.train.get("accumulation_steps", 1))
    groups: dict = {"pre": [], "micro": [], "post": []}
    stages = stage_of(job) if n > 1 else {}
    for conf in job.ops:
        if conf.op_type in SYSTEM_OPS or "seed_of" in conf.tags:
            continue
        op = registry.get(conf.op_type)
        if not op.random or conf.attrs.get("seed") is not None:
            continue
        stage = stages.get(conf.name, "micro")
        groups[stage].append(conf.name)
    return groups["pre"], groups["micro"], groups["post"]


def draw_seeds(job, order=None) -> dict:
    """op name -> list of seeds (one per micro-batch for per-micro-batch ops) for one call."""
    n = int(job.train.get("accumulation_steps", 1))
    pre, micro, post = order or random_ops_in_draw_order(job)
    seeds: dict = {}
    for name in pre:
        seeds[name] = [default_generator.next_seed()]
    for _ in range(n):
        for name in micro:
            seeds.setdefault(name, []).append(default_generator.next_seed())
    for name in post:
        seeds[name] = [default_generator.next_seed()]
    return seeds


class RuntimeExecutor:
    """Runs ``job`` on the actor runtime (see the module docstring)."""

    def __init__(self, job, options: CompileOptions | None = None):
        self.job = job
        self.plan = compile_job(job, options)
        self.runtime: Runtime | None = None
        self._order = random_ops_in_draw_order(job)
        _live.add(self)

    def _ensure_runtime(self, bindings: dict) -> Runtime:
        rt = self.runtime
        if rt is None or rt.aborted or rt.closed:
            if rt is not None:
                rt.close(timeout=5.0)
            rt = self.runtime = Runtime(self.plan, bindings)
        return rt

    def draw_seeds(self) -> dict:
        """One call's random seeds, drawn now from the global generator (the caller draws them
        when it makes the call, in the order eager code would)."""
        return draw_seeds(self.job, self._order)

    def launch(self, inputs: list, bindings: dict, overrides: dict | None = None,
               seeds: dict | None = None):
        """Start one call; returns a Future of the output arrays. ``overrides``: per-call
        variable values (see ``Runtime.launch``); ``seeds``: from ``draw_seeds`` (drawn here
        if not given)."""
        rt = self._ensure_runtime(bindings)
        return rt.launch(inputs, seeds if seeds is not None else self.draw_seeds(), overrides)

    def run(self, inputs: list, bindings: dict, overrides: dict | None = None,
            seeds: dict | None = None) -> list:
        """One call, waiting for its outputs (errors name the failing op)."""
        return self.launch(inputs, bindings, overrides, seeds).result()

    def close(self, timeout: float = 10.0) -> None:
        """Shut the runtime down (orderly; see ``Runtime.close``)."""
        rt, self.runtime = self.runtime, None
        if rt is not None:
            rt.close(timeout)

    def __del__(self):
        try:
            self.close(timeout=2.0)
        except Exception:
            pass


@atexit.register
def _close_all() -> None:
    for ex in list(_live):
        try:
            ex.close(timeout=2.0)
        except Exception:
            pass
