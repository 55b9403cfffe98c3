"""No wait between ranks is unbounded, and a graph call that fails on one rank fails on all.

With plain MPI a rank blocked in a collective waits forever when a peer died, raised, or issued
a different collective. The guards, installed when the program runs on several processes:

* ``guarded(op, detail)``: a context around each blocking MPI call (eager ``flow.comm`` and
  eager global boxings, communicator creation, the caller thread's metadata exchanges). A
  watchdog thread checks the call's age; past ``ACTORFLOW_COMM_TIMEOUT`` seconds (default 300)
  it prints which op, rank and shapes were stuck and aborts the MPI job, so every rank exits
  non-zero. The one record of a pending call is the thread's ``Slot`` (``slot()``): the
  context enters and leaves it, and the hot path of small collectives
  (``flow.comm.all_reduce``'s direct call) does so itself, without the context object; entering
  reads no clock: the watchdog dates a call from when it first sees it (at most ``POLL_S``
  late).
* ``wait(request, op, detail, group)``: how a distributed graph's collectives and transfers
  (ops with a ``group`` attr: the graph's own communicators) complete their non-blocking MPI
  request: a spin of ``Test`` for 2 ms, then ``Test`` between sleeps growing to 0.1 ms, so a
  wait for a late peer does not take a core from compute. It leaves by raising
  ``RemoteRankError`` (the graph call fails; the runtime aborts and its threads leave) when
  another rank's call of the same graph failed (a failure notice, below), when the request
  passed ``ACTORFLOW_COMM_TIMEOUT``, or when this thread's runtime already stopped. The
  runtime's transfer poller applies the same tests (``abandon_error``) to the requests it
  watches.
* failure notices: a rank whose distributed graph call failed (``call_failed``) sends the
  error's first line, the graph's communicator key and the call's number to every other rank on
  a communicator of its own. The watchdog thread receives them (every 50 ms) and marks the
  graph failed ("poisoned"): that graph's waits pending then, or started before this rank's own
  call of that number failed, raise naming the failing rank, its op and module path. A notice
  of a call that failed on this rank too is dropped. The graph then refuses later calls on
  every rank (no notice: the first failure's poisons the later calls' waits on the other ranks)
  (``nn.graph.compiled``: an abandoned collective would pair with the next call's). A notice
  that comes while a *blocking* guarded call is pending still aborts the job at once, as before
  (that call cannot be left otherwise).
* an exception hook: an uncaught exception on any rank is printed with the rank, then the job
  is aborted (MPI would otherwise wait in finalisation for ranks that will never come).

Exit: after the graph runtimes closed, every rank waits (at most ``EXIT_WAIT_S``) in
``exit_barrier`` (a non-blocking barrier on the notices' communicator) for the others, so none
finalizes MPI while a peer still needs it to finish a collective. After an abandoned wait: its
request may never complete. It is kept (with its buffers, so a late completion never writes
into freed memory) until the process ends, and the process exits normally: MPICH's
``MPI_Finalize`` returns with such requests pending (its collectives and point-to-point
requests on a duplicate communicator were checked), so a rank that caught the error exits 0 and
one that did not goes through the exception hook.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
import time

from actorflow.errors import RemoteRankError
from actorflow.settings import env_int

TIMEOUT_VAR = "ACTORFLOW_COMM_TIMEOUT"
_world = None
_notice_comm = None      # a duplicate of the world communicator, only for failure notices
_sent: list = []         # the notices' send requests (kept until they complete)
NOTICE_TAG = 31337
POLL_S = 0.05            # how often the watchdog thread looks for notices and stuck calls
# a graph wait tests its request this long before it sleeps (a blocking MPICH wait spins for
# as long as it waits; 0.3 ms made a 2-rank DP step's tiny all-reduces several times slower)
SPIN_S = 0.002
# the longest sleep between two tests of a pending request: MPICH moves a large message only
# inside MPI calls, so every test advances it; with 1 ms sleeps a 1-8 MiB all-reduce took 2-3x
# a blocking one (2 ranks, median of 15 rounds), with 0.1 ms the same as blocking
MAX_SLEEP_S = 0.0001
GRACE_S = 0.05           # a notice fails a wait whose request is still pending this long after
# graph key -> {call: [text, arrived, answered]}: the failure notices of other ranks' calls of
# that graph; ``answered``: when this rank's own call of that number (or a later one) failed,
# after which waits started later ignore the notice
_poison: dict = {}
_failed_calls: dict = {}  # graph key -> numbers of this rank's failed calls (the latest ones)
_lock = threading.Lock()
_abandoned: list = []     # (request, buffers) of waits given up on, kept until exit
# .stopped: a callable, True once this thread's runtime stopped; .slot: its Slot (slot())
_local = threading.local()


def timeout() -> float:
    """Seconds a blocking call between ranks may take (``ACTORFLOW_COMM_TIMEOUT``)."""
    return float(env_int(TIMEOUT_VAR, 300, minimum=1))


def graph_of(group: str) -> str:
    """The graph key of a graph's communicator key (its transfers' ``<key>_p2p`` included)."""
    return group[:-4] if group.endswith("_p2p") else group


class guarded:
    """Context: the blocking MPI call made inside is watched (see the module docstring): this
    thread's ``Slot`` entered and left around it. ``detail`` (the shapes) may be a callable,
    called only if the call is reported. Not nested (a thread makes one blocking call at a
    time)."""

    __slots__ = ("op", "detail", "slot")

    def __init__(self, op: str, detail: str = ""):
        self.op, self.detail = op, detail

    def __enter__(self):
        self.slot = slot()
        self.slot.enter(self.op, self.detail)

    def __exit__(self, *exc):
        self.slot.leave()
        return False


def _what(op: str, detail) -> str:
    detail = detail() if callable(detail) else detail
    return f"{op}{' ' + detail if detail else ''}"


def set_stopped_check(fn) -> None:
    """Make this thread's graph waits leave once ``fn()`` is True (its runtime stopped)."""
    _local.stopped = fn


def abandon_error(group: str, op: str, detail, started: float,
                  limit: float) -> RemoteRankError | None:
    """Why a graph wait on ``group`` pending since ``started`` (``time.monotonic``) must be
    given up, or None (see the module docstring); ``limit``: ``timeout()``."""
    now = time.monotonic()
    notes = _poison.get(graph_of(group))
    if notes:
        for text, arrived, answered in list(notes.values()):
            if now - arrived > GRACE_S and (answered is None or started < answered):
                err = RemoteRankError(f"{_what(op, detail)} abandoned: {text}")
                err.from_notice = True
                return err
    if now - started > limit:
        return RemoteRankError(
            f"{_what(op, detail)} did not complete in {now - started:.1f} s "
            f"({TIMEOUT_VAR}={limit:g}): another rank failed, exited or issued a different "
            f"collective")
    stopped = getattr(_local, "stopped", None)
    if stopped is not None and stopped():
        return RemoteRankError(f"{_what(op, detail)} abandoned: the runtime stopped")
    return None


def abandon(request, keep=()) -> None:
    """Keep ``request`` (never completed) and the buffers it uses alive until the process
    ends, past the interpreter's teardown: mpi4py calls ``MPI_Finalize`` after Python objects
    are freed, and MPICH may still complete the request there (a peer's late message landing
    in a receive buffer); a freed buffer then corrupts the heap (seen as glibc's "corrupted
    double linked list" at exit). One reference is never given back."""
    item = (request, keep)
    _abandoned.append(item)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(item))


def wait(request, op: str, detail, group: str | None, keep=()) -> None:
    """Complete the non-blocking MPI ``request`` of a collective or transfer (``keep``: the
    buffers it uses). A graph's (``group``: its communicator key) raises ``RemoteRankError``
    instead of waiting on for a peer that failed; without a group (eager) the wait is a
    blocking ``guarded`` one. See the module docstring."""
    if request.Test():
        return
    if group is None:
        with guarded(op, detail):
            request.Wait()
        return
    end = time.perf_counter() + SPIN_S
    while time.perf_counter() < end:
        if request.Test():
            return
    started, limit, delay = time.monotonic(), timeout(), 2e-5
    while True:
        time.sleep(delay)
        if request.Test():
            return
        delay = min(delay * 2, MAX_SLEEP_S)
        err = abandon_error(group, op, detail, started, limit)
        if err is not None:
            abandon(request, keep)
            raise err


class Slot:
    """A thread's cheap guard (``slot()``): ``enter(op, detail, arg)`` before a blocking MPI
    call, ``leave()`` after it (not nested). ``detail`` is the text naming the shapes, or a
    callable giving it (called with ``arg`` when not None), called only if the call is
    reported. The watchdog dates a call from the first time it sees it pending (at most one
    poll, ``POLL_S``, late), so entering reads no clock and allocates nothing."""

    __slots__ = ("seq", "op", "detail", "arg")

    def __init__(self):
        self.seq = 0   # odd while a call is pending; each enter and leave adds one
        self.op = self.detail = self.arg = None

    def enter(self, op: str, detail, arg=None) -> None:
        self.op, self.detail, self.arg = op, detail, arg
        self.seq += 1

    def leave(self) -> None:
        self.seq += 1
        self.arg = None  # after seq: a watchdog reading None here sees seq changed


_slots: dict = {}            # thread ident -> its Slot
_seen: dict = {}             # thread ident -> (seq, first time the watchdog saw it pending)


def slot() -> Slot:
    """This thread's ``Slot`` (made on first use)."""
    try:
        return _local.slot
    except AttributeError:
        s = _local.slot = _slots[threading.get_ident()] = Slot()
        return s


def _pending(now: float) -> list:
    """(op, detail, start time) of every guarded call pending now (the time the watchdog first
    saw it pending)."""
    out = []
    for ident, s in list(_slots.items()):
        seq = s.seq
        if seq & 1:
            op, detail, arg = s.op, s.detail, s.arg
            if arg is not None:
                detail = functools.partial(detail, arg)
            if s.seq != seq:  # it left (and maybe entered another call) meanwhile
                continue
            first = _seen.get(ident)
            if first is None or first[0] != seq:
                first = _seen[ident] = (seq, now)
            out.append((op, detail, first[1]))
    return out


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


def call_failed(group: str | None, call: int, notice: str | None = None) -> None:
    """This rank's call number ``call`` of the distributed graph whose communicator key is
    ``group`` failed. Records it (a notice of that call, or an earlier one, no longer fails
    waits started from now on) and, with ``notice`` (what failed), tells every other rank
    (``_notify``; see the module docstring). A call that failed only because of another
    rank's notice, or was refused after an earlier failure, passes no notice: the others
    already heard of the failure that caused it."""
    if group is not None:
        key = graph_of(group)
        with _lock:
            calls = _failed_calls.setdefault(key, [])
            calls.append(call)
            del calls[:-64]
            now = time.monotonic()
            notes = _poison.get(key, {})
            for c, note in list(notes.items()):
                if note[2] is None and c <= call:
                    note[2] = now
                elif note[2] is not None and now - note[2] > timeout() + 1:
                    del notes[c]   # no wait started before its answer is still pending
    if notice is not None:
        _notify(notice, group, call)


def _notify(message: str, group: str | None, call: int) -> None:
    """Send the failure notice of this rank's call ``call`` of ``group``'s graph to every
    other rank (nothing in one process). The send requests are kept until they complete
    (those completed are dropped here, so they do not pile up)."""
    comm = _notice_comm
    if comm is None:
        return
    _sent[:] = [req for req in _sent if not req.Test()]
    note = (_world.rank, None if group is None else graph_of(group), call,
            f"rank {_world.rank} failed: {message}")
    for peer in range(comm.Get_size()):
        if peer != comm.Get_rank():
            _sent.append(comm.isend(note, dest=peer, tag=NOTICE_TAG))


def _take_notice(key: str, call: int, text: str, arrived: float) -> None:
    """Poison graph ``key`` with another rank's failure of its call ``call`` (dropped if this
    rank's own call of that number failed too)."""
    with _lock:
        if call not in _failed_calls.get(key, ()):
            _poison.setdefault(key, {}).setdefault(call, [text, arrived, None])


def _receive_notices() -> None:
    """Take the failure notices that came: poison their graphs, and abort if a blocking call
    of this rank was already pending as one came."""
    from mpi4py import MPI

    while True:
        msg = _notice_comm.improbe(source=MPI.ANY_SOURCE, tag=NOTICE_TAG)
        if msg is None:
            return
        _, key, call, text = msg.recv()
        arrived = time.monotonic()
        if key is not None:
            _take_notice(key, call, text, arrived)
        waiting = [(op, d) for op, d, t0 in _pending(arrived) if t0 <= arrived]
        if waiting:
            op, detail = waiting[0]
            abort(f"{_what(op, detail)} abandoned: {text}; aborting every rank")


def _watch() -> None:
    while True:
        time.sleep(POLL_S)
        if _notice_comm is not None:
            _receive_notices()
        limit = timeout()
        now = time.monotonic()
        stuck = [(op, d, now - t0) for op, d, t0 in _pending(now) if now - t0 > limit]
        if stuck:
            op, detail, age = stuck[0]
            abort(f"{_what(op, detail)} did not complete in {age:.1f} s "
                  f"({TIMEOUT_VAR}={limit:g}): another rank failed, exited or issued a "
                  f"different collective; aborting every rank")


def _excepthook(kind, value, tb) -> None:
    import traceback

    text = "".join(traceback.format_exception(kind, value, tb))
    abort(f"uncaught exception; aborting every rank:\n{text.rstrip()}")


EXIT_WAIT_S = 10.0   # the longest a rank waits at exit for the others (``exit_barrier``)


def exit_barrier() -> None:
    """At interpreter exit, after the graph runtimes closed (``runtime.executor`` calls it):
    wait, bounded, until every rank got here, testing a non-blocking barrier. A graph
    collective can complete on this rank before its data reached a peer, which MPI delivers
    only while this rank keeps making MPI calls; a rank that finalized at once would leave that
    peer waiting in its last call (seen as "runtime shutdown timed out" at exit when calls were
    still in flight). A peer that never comes (it died) costs at most ``EXIT_WAIT_S``.

    The barrier runs on the watchdog's own communicator (``_notice_comm``), never the world's:
    this runs from ``atexit`` before the VM shuts down, so the communication worker may still
    be inside a collective on the world communicator, and MPI forbids two threads' concurrent
    collectives on one communicator (only point-to-point notices share this one)."""
    comm = _notice_comm
    if comm is None:
        return
    try:
        req = comm.Ibarrier()
    except Exception:  # MPI already finalized or broken: nothing to wait for
        return
    bound = min(EXIT_WAIT_S, timeout())
    arrived = time.time()  # (wall clock: the launcher compares the ranks' arrivals)
    end = time.monotonic() + bound
    while not req.Test():
        if time.monotonic() > end:
            abandon(req)
            _report_exit(False, bound, arrived)
            return
        time.sleep(1e-4)
    _report_exit(True, bound, arrived)


STATUS_DIR_VAR = "ACTORFLOW_LAUNCH_STATUS_DIR"  # set by ``distributed.launch`` for its ranks


def _report_exit(complete: bool, bound: float, arrived: float) -> None:
    """Say how this rank left: every rank reached the end of the program together
    (``complete``), or this one left while others had not come within ``bound`` seconds (it
    may have ended early: they may still be running without it). That is printed; under
    ``distributed.launch`` each rank also writes ``rank<r>`` (``complete <arrived>`` or
    ``timeout <arrived> <bound>``, ``arrived`` its wall-clock time at the exit) in the
    launcher's directory, and the launcher fails the job when a rank ended early or wrote
    nothing (``os._exit``, a signal)."""
    rank = _world.rank if _world is not None else 0
    if not complete:
        sys.stderr.write(f"[actorflow rank {rank}] reached the end of the program, but not every "
                         f"rank did within {bound:g} s: a rank ended early (the others may "
                         f"still be running without it)\n")
        sys.stderr.flush()
    directory = os.environ.get(STATUS_DIR_VAR)
    if not directory:
        return
    path = os.path.join(directory, f"rank{rank}")
    try:
        with open(path + ".tmp", "w") as f:
            f.write(f"complete {arrived!r}" if complete else f"timeout {arrived!r} {bound!r}")
        os.replace(path + ".tmp", path)
    except OSError as e:  # the launcher then reports this rank as ending without a word
        sys.stderr.write(f"[actorflow rank {rank}] could not write its exit status to "
                         f"{path}: {e}\n")


def install(world) -> None:
    """Start the watchdog thread and the exception hook for ``world`` (several ranks)."""
    global _world, _notice_comm
    _world = world
    _notice_comm = world.comm.Dup()   # every rank installs at import, so the Dup lines up
    threading.Thread(target=_watch, name="actorflow-comm-watchdog", daemon=True).start()
    sys.excepthook = _excepthook
