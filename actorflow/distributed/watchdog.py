"""No wait between ranks is unbounded.

With plain MPI a rank blocked in a collective waits forever when a peer died, raised, or issued
a different collective. Two guards, installed when the program runs on several processes:

* ``guarded(op, detail)``: a context around each blocking MPI call. A watchdog thread checks
  the call's age; past ``ACTORFLOW_COMM_TIMEOUT`` seconds (default 300) it prints which op, rank
  and shapes were stuck and aborts the MPI job, so every rank exits non-zero.
* an exception hook: an uncaught exception on any rank is printed with the rank, then the job
  is aborted (MPI would otherwise wait in finalisation for ranks that will never come).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from actorflow.settings import env_int

TIMEOUT_VAR = "ACTORFLOW_COMM_TIMEOUT"
# thread ident -> (op, detail, start time); a dict item set or popped is atomic under the GIL,
# and the watchdog reads a snapshot, so the guarded calls need no lock
_calls: dict = {}
_world = None


def timeout() -> float:
    """Seconds a blocking call between ranks may take (``ACTORFLOW_COMM_TIMEOUT``)."""
    return float(env_int(TIMEOUT_VAR, 300, minimum=1))


class guarded:
    """Context: the blocking MPI call made inside is watched (see the module docstring).
    ``detail`` (the shapes) may be a callable, called only if the call is reported."""

    __slots__ = ("op", "detail")

    def __init__(self, op: str, detail: str = ""):
        self.op, self.detail = op, detail

    def __enter__(self):
        _calls[threading.get_ident()] = (self.op, self.detail, time.monotonic())

    def __exit__(self, *exc):
        _calls.pop(threading.get_ident(), None)
        return False


def abort(message: str, code: int = 1) -> None:
    """Print ``message`` naming this rank and end every rank of the job."""
    rank = _world.rank if _world is not None else 0
    sys.stderr.write(f"[actorflow rank {rank}] {message}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # MPI_Abort makes the launcher kill every process at once; its forwarding of this rank's
    # output can lose what was just written unless the launcher gets a moment to read it
    time.sleep(0.5)
    comm = _world.comm if _world is not None else None
    if comm is not None:
        comm.Abort(code)
    os._exit(code)


def _watch() -> None:
    while True:
        time.sleep(0.2)
        limit = timeout()
        now = time.monotonic()
        stuck = [(op, d, now - t0) for op, d, t0 in list(_calls.values()) if now - t0 > limit]
        if stuck:
            op, detail, age = stuck[0]
            detail = detail() if callable(detail) else detail
            abort(f"{op}{' ' + detail if detail else ''} did not complete in {age:.1f} s "
                  f"({TIMEOUT_VAR}={limit:g}): another rank failed, exited or issued a "
                  f"different collective; aborting every rank")


def _excepthook(kind, value, tb) -> None:
    import traceback

    text = "".join(traceback.format_exception(kind, value, tb))
    abort(f"uncaught exception; aborting every rank:\n{text.rstrip()}")


def install(world) -> None:
    """Start the watchdog thread and the exception hook for ``world`` (several ranks)."""
    global _world
    _world = world
    threading.Thread(target=_watch, name="actorflow-comm-watchdog", daemon=True).start()
    sys.excepthook = _excepthook
