"""RuntimeExecutor: the ``actorflow.job.executor.Executor`` that runs a Job on the actor
runtime.

It compiles the Job into a Plan once, starts a Runtime on first use (and again after a failure
tore the previous one down), and closes its runtime when it is closed, garbage-collected or the
interpreter exits. Its Futures complete on the sink's thread; several calls may be in flight.
"""
from __future__ import annotations

import atexit
import weakref

from actorflow.compiler import CompileOptions, compile_job
from actorflow.process import watchdog
from actorflow.job.executor import Executor, Future
from actorflow.job.schedule import draw_seeds, seed_draw_order
from actorflow.runtime.runtime import Runtime

_live: "weakref.WeakSet[RuntimeExecutor]" = weakref.WeakSet()


class RuntimeExecutor(Executor):
    """Runs ``job`` on the actor runtime (see the module docstring)."""

    def __init__(self, job, options: CompileOptions | None = None):
        self.job = job
        self.plan = compile_job(job, options)
        self.runtime: Runtime | None = None
        self._order = seed_draw_order(job)
        _live.add(self)

    def _ensure_runtime(self, bindings: dict) -> Runtime:
        rt = self.runtime
        if rt is None or rt.aborted or rt.closed:
            if rt is not None:
                rt.close(timeout=5.0)
            rt = self.runtime = Runtime(self.plan, bindings)
        return rt

    def launch(self, inputs: list, bindings: dict, overrides: dict | None = None,
               seeds: dict | None = None) -> Future:
        """Start one call (see ``Executor``); the output actors copy results out of register
        memory, so the arrays are the caller's."""
        rt = self._ensure_runtime(bindings)
        if seeds is None:
            seeds = draw_seeds(self.job, self._order)
        return rt.launch(inputs, seeds, overrides)

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
    # several ranks: no rank finalizes MPI while a peer may still need it for a collective
    watchdog.exit_barrier()
