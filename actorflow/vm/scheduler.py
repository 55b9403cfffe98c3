"""Issuing instructions, tracking their storage dependencies, and the sync points.

Issue (caller's thread, under one lock so issue order is one total order):
  * a read waits for the storage's last writer (read-after-write) and joins its readers;
  * a write waits for the last writer and every reader since (write-after-write,
    write-after-read), then becomes the writer;
  * the instruction goes on the queue of the caller's current worker (``flow.asyncs.thread``).
A worker takes instructions in queue order and waits for dependencies on other workers before
running one. Dependencies always point to earlier-issued instructions and every queue is in
issue order, so waits can't form a cycle.

Failures: a kernel exception becomes a ``KernelError`` kept on the instruction. Instructions
that read or overwrite a failed result are skipped and carry the same error. The error belongs
to what it poisoned (``actorflow/vm/failures.py``): reading the failed outputs raises it (so does
issuing an op on them); the memory a failed instruction was to write in place keeps its values
and its next read raises the error, once. ``synchronize()`` reports the failures nobody read,
once, all together.

Memory NumPy code shares (``Storage.shared``) is not the VM's alone: an instruction reading or
writing it completes before its op returns. Back-pressure bounds each worker's queued
instructions by count (``MAX_QUEUED``, deferred launches such as graph calls counted until they
finish) and by the bytes they allocated (``MAX_QUEUED_BYTES``). An exception a signal handler
raises on the issuing thread (Ctrl-C) never leaves an instruction half issued or half run.

Blocking mode (``ACTORFLOW_EAGER_BLOCKING=1`` or ``set_blocking(True)``) runs each instruction
on the calling thread before ``issue`` returns and raises its error there. Instructions issued
from a worker thread (a launched callable that calls ops) also run inline, so a worker never
waits for itself.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from _thread import allocate_lock as _allocate_lock
from time import perf_counter

from actorflow import profiler as _profiler
from actorflow.settings import env_flag, env_int
from actorflow.vm.instruction import (
    Instruction, KernelError, Storage, capture_stack, detach_traceback, make_error,
)
from actorflow.vm import failures
from actorflow.vm.worker import WorkerPool

BLOCKING_VAR = "ACTORFLOW_EAGER_BLOCKING"
INLINE_VAR = "ACTORFLOW_VM_INLINE_MAX_ELEMENTS"
BYTES_VAR = "ACTORFLOW_VM_MAX_QUEUED_BYTES"
MAX_QUEUED = 2048        # per worker; issuing more first waits until half have completed
# per worker: bytes the queued instructions allocated (outputs; a graph call's inputs and
# outputs); issuing beyond it first waits until half that is left
MAX_QUEUED_BYTES = env_int(BYTES_VAR, 256 << 20, minimum=1)
_PRUNE_AT = 16           # prune finished readers from a storage's list at this length
_RETRIES = 64            # bookkeeping interrupted by a signal handler's exception is redone

_lock = threading.Lock()                         # the issue lock
_reg = threading.Lock()  # guards Instruction.waiters registration
_deferred: set = set()   # launched deferred instructions whose finish() has not come yet
_blocking = env_flag(BLOCKING_VAR, False)

# kernels touching at most this many elements in all (inputs + outputs) count as "small"
INLINE_MAX_ELEMENTS = env_int(INLINE_VAR, 4096, minimum=0)


def _run_on_worker(ins: Instruction, worker) -> None:
    if ins.started:  # put twice by an issue an interrupt made redo its last step: run once
        return
    try:
        _execute(ins)
    except BaseException as e:  # a bug in the VM itself: fail the instruction, keep the thread
        if not ins.done:
            err = KernelError(f"{ins.name}: the VM failed while running it: "
                              f"{type(e).__name__}: {e}")
            err.__cause__ = e
            failures.record(err)
            _complete(ins, err)
    worker.finished += 1


_pool = WorkerPool(_run_on_worker)


class _ThreadState(threading.local):
    def __init__(self):
        self.worker = _pool.default
        self.stack: list = []
        self.on_worker = threading.current_thread().name.startswith("actorflow-vm-worker-")


_tls = _ThreadState()


# ---- issue ------------------------------------------------------------------------------------

def _check_input(s: Storage) -> bool:
    """Raise the error a read or write of ``s`` must report (a failed writer's; an unreported
    failure of an in-place write into it); True if NumPy code shares the memory."""
    x = s.writer
    if x is not None and x.error is not None:
        _raise(x.error)
    f = s.failed
    if f is not None:
        s.failed = None
        if failures.is_unreported(f):
            _raise(f)
    return s.shared


def issue(fn, args: tuple, *, reads, writes, name: str, fresh=(), where=None, shapes=None,
          kind: str = "compute", deferred: bool = False, small: bool = False,
          chain=None, nbytes: int = 0, throttle: bool = True) -> Instruction:
    """Issue ``fn(*args)`` as an instruction on the current worker's ``kind`` stream (all
    but ``fn`` and ``args`` by keyword).

    ``reads`` / ``writes`` are the ``Storage`` records it reads and writes; ``fresh`` are
    storages of new outputs (written, nothing to wait for). ``where`` (the module-name list of
    the caller's scope, copied if the instruction is queued) and ``shapes`` (input arrays) only
    serve error messages. A ``deferred`` instruction is called as
    ``fn(finish, *args)`` and completes when ``finish(exc=None)`` is called. ``small`` marks
    trivially cheap work that may run inline on the calling thread when that changes nothing
    observable: the worker has nothing queued or running and no dependency is pending.
    ``nbytes``: the memory it holds until it completes (its outputs), for back-pressure.
    ``throttle=False`` leaves the back-pressure wait to the caller (``throttle()``), for one
    that has bookkeeping to finish first.

    An instruction on memory NumPy code shares (``Storage.shared``) completes before this
    returns (its error, if any, is raised here). Bookkeeping interrupted by an exception from
    a signal handler (Ctrl-C) is finished before that exception goes on: the instruction is
    issued whole, never half.
    """
    tls = _tls
    w = tls.worker
    stream = w.compute if kind == "compute" else w.stream(kind)
    ins = Instruction(fn, args, name, stream, where, shapes, deferred)
    ins.chain = chain
    ins.nbytes = nbytes
    shared = False
    for s in reads:
        if _check_input(s):
            shared = True
    for s in writes:
        if _check_input(s):
            shared = True
    forced = _blocking or tls.on_worker
    after = war = None
    stage = 0  # of the queueing below, for a redo after an interrupt
    interrupt = None
    inline = False
    with _lock:
        for _attempt in range(_RETRIES):
            try:
                for s in reads:
                    x = s.writer
                    if x is not None and not x.done:
                        if after is None:
                            after = [x]
                        else:
                            after.append(x)
                    r = s.readers
                    if r is None:
                        s.readers = [ins]
                    elif not r or r[-1] is not ins:  # (a redo must not add it twice)
                        n = len(r)
                        if n >= _PRUNE_AT and not n & (n - 1):  # at powers of two: O(1)
                            r[:] = [y for y in r if not y.done]
                        r.append(ins)
                for s in writes:
                    x = s.writer
                    # x is ins when a storage is listed twice (a parameter twice in a
                    # multi-tensor update), or on a redo: an instruction never waits for itself
                    if x is ins:
                        continue
                    if x is not None and not x.done:
                        if after is None:
                            after = [x]
                        else:
                            after.append(x)
                    r = s.readers
                    if r:
                        for y in r:
                            if y is not ins and not y.done:
                                if war is None:
                                    war = [y]
                                else:
                                    war.append(y)
                    if ins.restore is None:
                        ins.restore = [(s, x)]
                    else:
                        ins.restore.append((s, x))
                    s.writer = ins  # (no call between these two: one step for signals)
                    s.readers = None
                for s in fresh:
                    s.writer = ins
                ins.after = after
                ins.war = war
                if deferred:
                    _deferred.add(ins)
                # inline: nothing queued on the worker and nothing to wait for, so running it
                # here orders it exactly as the worker would
                inline = forced or (small and after is None and war is None and w.idle())
                if not inline:
                    if stage == 0:
                        _prune(w)
                        ins.stack = capture_stack(3)
                        ins.where = tuple(where) if where else None  # the live list changes
                        if w.thread is None:
                            w.ensure_started()
                        w.pending_bytes += nbytes
                        w.issued += 1
                        stage = 1  # (no call since the counts changed)
                    if stage == 1:
                        p = w.pending
                        if not p or p[-1] is not ins:
                            p.append(ins)
                        stage = 2
                    if stage == 2:
                        w.queue.put(ins)  # a redo may put it twice: the worker runs it once
                        stage = 3
                break
            except BaseException as e:  # a signal handler raised (Ctrl-C): finish, then raise
                if interrupt is None:
                    interrupt = e
    if interrupt is not None:
        if inline:  # not run: fail it, so that nothing waits for it
            _complete_surely(ins, _interrupted(ins, interrupt))
        raise interrupt
    if inline:
        if forced:
            _run_inline(ins, True)
        else:  # small, nothing pending: the fast path of _execute + _complete
            ins.started = True
            prof = _profiler.ACTIVE
            t0 = perf_counter() if prof is not None else 0.0
            try:
                fn(*args)
            except Exception as e:  # kept for the next sync point, as if on the worker
                if prof is not None:
                    prof.record_instruction(name, stream.kind, t0, perf_counter())
                _complete(ins, _error_for(ins, e))
            except BaseException as e:  # interrupted on this thread: only this op fails
                _complete_surely(ins, _interrupted(ins, e))
                raise
            else:
                if prof is not None:
                    prof.record_instruction(name, stream.kind, t0, perf_counter())
                _complete_surely(ins, None)
        if shared and ins.error is not None and failures.is_unreported(ins.error):
            _raise(ins.error)
    else:
        if shared and not ins.done:
            wait_for(ins)  # NumPy code may touch the memory as soon as the op returns
            if ins.error is not None and failures.is_unreported(ins.error):
                _raise(ins.error)
        elif throttle and (len(w.pending) > MAX_QUEUED or w.pending_bytes > MAX_QUEUED_BYTES):
            _throttle(w)
    return ins


def throttle() -> None:
    """The back-pressure wait ``issue`` does unless told not to: when the current worker's
    queued instructions exceed ``MAX_QUEUED`` or ``MAX_QUEUED_BYTES``, wait until half that is
    left."""
    w = _tls.worker
    if len(w.pending) > MAX_QUEUED or w.pending_bytes > MAX_QUEUED_BYTES:
        _throttle(w)


def _execute(ins: Instruction) -> None:
    """Wait for the dependencies, then run (or skip, if a dependency failed)."""
    ins.started = True
    err = None
    after = ins.after
    if after is not None:
        for d in after:
            if not d.done and not _chained(d, ins):
                wait_for(d)
            if err is None and d.error is not None:
                err = d.error
    war = ins.war
    if war is not None:
        for d in war:
            if not d.done and not _chained(d, ins):
                wait_for(d)
    if err is None:
        prof = _profiler.ACTIVE
        t0 = perf_counter() if prof is not None else 0.0
        try:
            if ins.deferred:
                ins.fn(_Finisher(ins), *ins.args)
                ins.launched = True
                if prof is not None:  # the launch; its work shows in the executor's events
                    prof.record_instruction(ins.name, ins.stream.kind, t0, perf_counter())
                return  # completes when finish() is called (maybe already)
            ins.fn(*ins.args)
        except Exception as e:  # reported at the next sync point, with the issuing stack
            err = _error_for(ins, e)
        if prof is not None:
            prof.record_instruction(ins.name, ins.stream.kind, t0, perf_counter())
    _complete(ins, err)


def _chained(d: Instruction, ins: Instruction) -> bool:
    """``d`` and ``ins`` are deferred launches into one self-ordering executor and ``d`` is
    launched: the executor runs ``ins``'s work after ``d``'s, so ``ins`` may launch now."""
    return d.launched and d.chain is not None and d.chain is ins.chain


def _error_for(ins: Instruction, exc: BaseException) -> KernelError:
    """The KernelError for ``exc`` raised by ``ins``, recorded as unreported."""
    try:
        err = make_error(ins, exc)
    except Exception:  # formatting must not lose the failure
        err = KernelError(f"{ins.name}: kernel failed: {type(exc).__name__}: {exc}")
        err.__cause__ = exc
    detach_traceback(exc)  # kept until reported: must not keep the failed call's frames
    failures.record(err)
    return err


def _interrupted(ins: Instruction, exc: BaseException) -> KernelError:
    """The error of an instruction that an exception from a signal handler (Ctrl-C) stopped
    on the issuing thread. That exception reaches the user, so this one counts as reported;
    it only marks the op's outputs as holding no values."""
    err = KernelError(f"{ins.name}: interrupted by {type(exc).__name__} before it completed "
                      f"(its outputs hold no values)")
    err.vm_reported = True
    return err


def _complete(ins: Instruction, err) -> None:
    """Mark ``ins`` done with ``err`` and wake its waiters. Running it again finishes what an
    interrupted run left (``_complete_surely``)."""
    if not ins.done:
        # A finished instruction keeps only what dependency tracking and error reporting need
        # (``done``, ``error``, its name): storages remember their last writer, so anything
        # else held here (the callable and its closure, arrays, a graph's compiled state
        # through ``chain``) would outlive its user.
        ins.fn = ins.args = ins.after = ins.war = ins.chain = ins.stack = ins.shapes = None
        ins.error = err
        if err is not None and ins.restore is not None:
            # A failure poisons only the outputs the instruction created: memory it writes in
            # place (parameters, optimizer state, in-place ops) gets its previous writer back,
            # so it stays readable and writable, and its next read reports the failure (once
            # in all). Instructions issued after this one and ordered on that memory still
            # carry the error (they depend on this instruction itself).
            report = failures.is_unreported(err)
            with _lock:
                for s, prev in ins.restore:
                    if s.writer is ins:
                        s.writer = None if prev is not None and prev.done and \
                            prev.error is not None else prev
                        if report:
                            s.failed = err
        ins.restore = None
        ins.done = True
    # A waiter registers, then re-checks ``done``; we set ``done``, then read ``waiters``:
    # under the GIL one of the two sees the other, so no wake-up is lost. (A lock registered
    # after this read finds ``done`` set and never blocks, so the list can go.)
    ws = ins.waiters
    if ws is not None:
        for lk in ws:
            if lk.locked():
                lk.release()
        ins.waiters = None
    if ins.deferred:
        _deferred.discard(ins)


def _complete_surely(ins: Instruction, err) -> None:
    """``_complete``, redone if an exception from a signal handler interrupts it (which is
    raised afterwards): a half-completed instruction would leave its waiters blocked."""
    interrupt = None
    for _attempt in range(_RETRIES):
        try:
            _complete(ins, err)
            break
        except BaseException as e:
            if interrupt is None:
                interrupt = e
    if interrupt is not None:
        raise interrupt


class _Finisher:
    """The ``finish(exc=None)`` callback a deferred instruction receives; call it once, from
    any thread, when the work it launched has completed (or failed with ``exc``)."""

    __slots__ = ("_ins",)

    def __init__(self, ins: Instruction):
        self._ins = ins

    def __call__(self, exc: BaseException | None = None) -> None:
        ins, self._ins = self._ins, None
        if ins is None:
            raise RuntimeError("finish() was already called for this instruction")
        _complete_surely(ins, _error_for(ins, exc) if exc is not None else None)


def _run_inline(ins: Instruction, forced: bool) -> None:
    """Run ``ins`` on the calling thread (blocking mode, a worker thread, or small idle work).
    Forced runs raise the error here; opportunistic ones keep it for the next sync point,
    exactly as if the worker had run it. An interrupt (Ctrl-C) fails this instruction alone."""
    try:
        _execute(ins)
        if ins.deferred and not ins.done:
            wait_for(ins)
    except BaseException as e:
        if not ins.done and not (ins.deferred and ins.launched):
            _complete_surely(ins, _interrupted(ins, e))
        raise
    if forced and ins.error is not None and failures.is_unreported(ins.error):
        _raise(ins.error)


def _throttle(w) -> None:
    """Wait until at most half of ``MAX_QUEUED`` instructions and of ``MAX_QUEUED_BYTES`` are
    queued on ``w`` (or one instruction, when that one alone holds more)."""
    p = w.pending
    while True:
        with _lock:
            _prune(w)
        if len(p) <= 1 or (len(p) <= MAX_QUEUED // 2
                           and w.pending_bytes <= MAX_QUEUED_BYTES // 2):
            return
        wait_for(p[0])


def _prune(w) -> None:
    """Drop the completed instructions at the front of ``w.pending`` (under the issue lock)."""
    p = w.pending
    while p and p[0].done:
        w.pending_bytes -= p[0].nbytes
        p.popleft()
    if not p:
        w.pending_bytes = 0  # (resets any count an interrupted prune left behind)


# ---- waiting ----------------------------------------------------------------------------------

def wait_for(ins: Instruction) -> None:
    """Block until ``ins`` is done (no error check). The completer wakes exactly the threads
    waiting for it, so a waiting caller costs the worker nothing per other instruction."""
    if ins.done:
        return
    if _tls.on_worker and not ins.started and ins.stream is not None and \
            ins.stream.worker.thread is threading.current_thread():
        raise RuntimeError(f"a VM worker thread would wait for {ins.name!r}, which is queued "
                           f"behind it on the same worker (a launched callable must not read "
                           f"results of instructions issued after it)")
    lk = _allocate_lock()
    lk.acquire()
    with _reg:
        ws = ins.waiters
        if ws is None:
            ins.waiters = [lk]
        else:
            ws.append(lk)
    if ins.done:
        return
    lk.acquire()


def _raise(err: KernelError):
    """Raise (a copy of) ``err``, which then counts as reported."""
    failures.raise_error(err)


def sync_read(storage: Storage) -> None:
    """Wait until ``storage`` can be read: its last writer has run. Raises that writer's error
    (the memory holds no values), or once the unreported failure of an in-place write into it
    (the memory holds its previous values). Failures of unrelated instructions are not raised
    here: ``synchronize()`` reports those."""
    x = storage.writer
    if x is not None:
        if not x.done:
            wait_for(x)
        if x.error is not None:
            _raise(x.error)
    f = storage.failed
    if f is not None:
        storage.failed = None
        if failures.is_unreported(f):
            _raise(f)


def sync_write(storage: Storage) -> None:
    """Wait until ``storage`` can be written from outside the VM: its last writer and every
    reader since have run."""
    sync_read(storage)
    r = storage.readers
    if r:
        for y in list(r):
            if not y.done:
                wait_for(y)


def synchronize() -> None:
    """Wait for every instruction issued so far (all workers, deferred launches included);
    then report the failures no sync point has raised yet, once, all together (the oldest is
    raised; a note counts the others). Afterwards none is pending or kept."""
    _drain()
    failures.raise_all()


def _drain() -> None:
    """Wait for every queued instruction (FIFO: the last one of each worker) and every
    deferred launch issued so far."""
    for w in _pool.all:
        p = w.pending
        if p:
            last = p[-1]
            if not last.done:
                wait_for(last)
    if _deferred:
        for d in list(_deferred):
            wait_for(d)


# ---- modes and worker selection ---------------------------------------------------------------

def is_blocking() -> bool:
    """True when every instruction runs before its op returns."""
    return _blocking


def set_blocking(flag: bool) -> None:
    """Switch blocking mode (waits for pending work first)."""
    global _blocking
    _drain()
    _blocking = bool(flag)


def current_worker():
    """The worker that ops issued on this Python thread go to."""
    return _tls.worker


def push_worker(worker) -> None:
    """Make ``worker`` current on this Python thread (until ``pop_worker``)."""
    _tls.stack.append(_tls.worker)
    _tls.worker = worker


def pop_worker() -> None:
    tls = _tls
    if not tls.stack:
        raise RuntimeError("pop_worker: no worker was pushed on this thread")
    tls.worker = tls.stack.pop()


def pool() -> WorkerPool:
    return _pool


def unreported_errors() -> list:
    """The oldest kernel errors not yet raised to the user (at most ``failures.KEEP``)."""
    return failures.unreported()


def _before_fork() -> None:
    if not _tls.on_worker:
        _drain()  # nothing may be in flight across a fork: the child has no worker threads


def _after_fork_in_child() -> None:
    global _lock, _reg
    _lock, _reg = threading.Lock(), threading.Lock()  # another thread may have held them
    _pool.reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown() -> None:
    for w in _pool.workers():
        w.stop(timeout=10.0)
    n = failures.unreported_count()
    if n > 0:
        first = failures.unreported()
        sys.stderr.write(f"actorflow: {n} kernel error(s) were never reported (no sync point "
                         f"read the failed results)" +
                         (f"; the first:\n{first[0]}\n" if first else "\n"))
