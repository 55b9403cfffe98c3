"""Holding back Ctrl-C over a short stretch of bookkeeping that must not stop half done.

A graph call is issued as one VM instruction and then recorded on the Python side (its output
buffer, the learning-rate scheduler's step, the call count, writes to its inputs). A
``KeyboardInterrupt`` landing between the two would leave a call that runs but that the
scheduler never counted. ``deferred_interrupts()`` makes such a stretch atomic for SIGINT: while
it is open, a SIGINT is recorded instead of raising, and the handler that was installed runs when
the stretch ends (so ``KeyboardInterrupt`` is raised right after it, on the same thread). Keep
the stretch short and free of waits that may last: Ctrl-C is late by its length.

Only the main thread runs signal handlers, so on other threads (and where SIGINT has no Python
handler) the context does nothing.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def deferred_interrupts():
    """Record a SIGINT arriving inside the ``with`` block and run the previous handler (by
    default: raise ``KeyboardInterrupt``) once the block has ended."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN, SIG_DFL or a handler not set from Python
        yield
        return
    caught: list = []

    def record(signum, frame):
        caught.append((signum, frame))

    signal.signal(signal.SIGINT, record)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            previous(*caught[0])
