"""Issuing instructions, tracking their storage dependencies, and the sync points.

Issue (caller's thread, under one lock so issue order is one total order):
  * a read waits for the storage's last writer (read-after-write) and joins its readers;
  * a write waits for the last writer and every reader since (write-after-write,
    write-after-read), then becomes the writer;
  * the instruction goes on the queue of the caller's current worker (``flow.asyncs.thread``).
A worker takes instructions in queue order and waits for dependencies on other workers before
running one. Dependencies always point to earlier-issued instructions and every queue is in
issue order, so waits can't form a cycle.

Failures: a kernel exception becomes a ``KernelError`` kept on the instruction and in a list of
unreported errors. Instructions that read or overwrite a failed result are skipped and carry the
same error. The error is raised by the next sync point (``Tensor._array()``, ``synchronize()``)
or by the next op issued on the failed result.

Blocking mode (``ACTORFLOW_EAGER_BLOCKING=1`` or ``set_blocking(True)``) runs each instruction
on the calling thread before ``issue`` returns and raises its error there. Instructions issued
from a worker thread (a launched callable that calls ops) also run inline, so a worker never
waits for itself.
"""
from __future__ import annotations

import atexit
import copy as _copy
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
from actorflow.vm.worker import WorkerPool

BLOCKING_VAR = "ACTORFLOW_EAGER_BLOCKING"
INLINE_VAR = "ACTORFLOW_VM_INLINE_MAX_ELEMENTS"
MAX_QUEUED = 2048        # per worker; issuing more first waits until half have run
_PRUNE_AT = 16           # prune finished readers from a storage's list at this length

_lock = threading.Lock()                         # the issue lock
_reg = threading.Lock()  # guards Instruction.waiters registration
_errors: list = []       # KernelErrors not yet raised to the user, oldest first
_deferred: set = set()   # launched deferred instructions whose finish() has not come yet
_blocking = env_flag(BLOCKING_VAR, False)

# kernels touching at most this many elements in all (inputs + outputs) count as "small"
INLINE_MAX_ELEMENTS = env_int(INLINE_VAR, 4096, minimum=0)


def _run_on_worker(ins: Instruction, worker) -> None:
    try:
        _execute(ins)
    except BaseException as e:  # a bug in the VM itself: fail the instruction, keep the thread
        if not ins.done:
            err = KernelError(f"{ins.name}: the VM failed while running it: "
                              f"{type(e).__name__}: {e}")
            err.__cause__ = e
            _errors.append(err)
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

def issue(fn, args: tuple, *, reads, writes, name: str, fresh=(), where=None, shapes=None,
          kind: str = "compute", deferred: bool = False, small: bool = False,
          chain=None) -> Instruction:
    """Issue ``fn(*args)`` as an instruction on the current worker's ``kind`` stream (all
    but ``fn`` and ``args`` by keyword).

    ``reads`` / ``writes`` are the ``Storage`` records it reads and writes; ``fresh`` are
    storages of new outputs (written, nothing to wait for). ``where`` (the module-name list of
    the caller's scope, copied if the instruction is queued) and ``shapes`` (input arrays) only
    serve error messages. A ``deferred`` instruction is called as
    ``fn(finish, *args)`` and completes when ``finish(exc=None)`` is called. ``small`` marks
    trivially cheap work that may run inline on the calling thread when that changes nothing
    observable: the worker has nothing queued or running and no dependency is pending.
    """
    tls = _tls
    w = tls.worker
    stream = w.compute if kind == "compute" else w.stream(kind)
    ins = Instruction(fn, args, name, stream, where, shapes, deferred)
    ins.chain = chain
    for s in reads:
        x = s.writer
        if x is not None and x.error is not None:
            _raise(x.error)
    for s in writes:
        x = s.writer
        if x is not None and x.error is not None:
            _raise(x.error)
    forced = _blocking or tls.on_worker
    with _lock:
        after = war = None
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
            else:
                n = len(r)
                if n >= _PRUNE_AT and not n & (n - 1):  # at powers of two: amortised O(1)
                    r[:] = [y for y in r if not y.done]
                r.append(ins)
        for s in writes:
            x = s.writer
            # x is ins when a storage is listed twice (a parameter twice in a multi-tensor
            # update): an instruction never waits for itself
            if x is not None and x is not ins and not x.done:
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
            s.readers = None
            if x is not ins:
                if ins.restore is None:
                    ins.restore = [(s, x)]
                else:
                    ins.restore.append((s, x))
            s.writer = ins
        for s in fresh:
            s.writer = ins
        ins.after = after
        ins.war = war
        if deferred:
            _deferred.add(ins)
        # inline: nothing queued on the worker (issued == finished) and nothing to wait for,
        # so running it here orders it exactly as the worker would
        inline = forced or (small and after is None and war is None
                            and w.issued == w.finished)
        if not inline:
            ins.stack = capture_stack(3)
            ins.where = tuple(where) if where else None  # the live list changes later
            if w.thread is None:
                w.ensure_started()
            w.issued += 1
            w.tail.append(ins)
            w.queue.put(ins)
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
            else:
                if prof is not None:
                    prof.record_instruction(name, stream.kind, t0, perf_counter())
                ins.fn = ins.args = ins.shapes = ins.restore = None
                ins.done = True
                ws = ins.waiters
                if ws is not None:
                    ins.waiters = None
                    for lk in ws:
                        lk.release()
    elif w.issued - w.finished > MAX_QUEUED:
        _throttle(w)
    return ins


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
    _errors.append(err)
    return err


def _complete(ins: Instruction, err) -> None:
    # A finished instruction keeps only what dependency tracking and error reporting need
    # (``done``, ``error``, its name): workers remember their last few thousand instructions
    # and storages their last writer, so anything else held here (the callable and its
    # closure, arrays, a graph's compiled state through ``chain``) would outlive its user.
    ins.fn = ins.args = ins.after = ins.war = ins.chain = ins.stack = ins.shapes = None
    ins.error = err
    if err is not None and ins.restore is not None:
        # A failure poisons only the outputs the instruction created: memory it writes in
        # place (parameters, optimizer state, in-place ops) gets its previous writer back, so
        # it stays readable and writable. Instructions issued after this one and ordered on
        # that memory still carry the error (they depend on this instruction itself).
        with _lock:
            for s, prev in ins.restore:
                if s.writer is ins:
                    s.writer = None if prev is not None and prev.done and \
                        prev.error is not None else prev
    ins.restore = None
    ins.done = True
    # A waiter registers, then re-checks ``done``; we set ``done``, then read ``waiters``:
    # under the GIL one of the two sees the other, so no wake-up is lost. (A lock registered
    # after this read finds ``done`` set and never blocks, so the list can go.)
    ws = ins.waiters
    if ws is not None:
        ins.waiters = None
        for lk in ws:
            lk.release()
    if ins.deferred:
        _deferred.discard(ins)


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
        _complete(ins, _error_for(ins, exc) if exc is not None else None)


def _run_inline(ins: Instruction, forced: bool) -> None:
    """Run ``ins`` on the calling thread (blocking mode, a worker thread, or small idle work).
    Forced runs raise the error here; opportunistic ones keep it for the next sync point,
    exactly as if the worker had run it."""
    _execute(ins)
    if ins.deferred and not ins.done:
        wait_for(ins)
    if forced and ins.error is not None:
        _raise(ins.error)


def _throttle(w) -> None:
    # the queue is FIFO: once the instruction MAX_QUEUED // 2 from its end has run, at most
    # that many remain
    k = min(MAX_QUEUED // 2, len(w.tail))
    if k:
        wait_for(w.tail[-k])


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
    try:
        _errors.remove(err)
    except ValueError:
        pass
    # Raise a copy: ``err`` stays on its instruction (later readers of the failed result raise
    # it too), and the traceback of where it was reported would keep those frames' locals
    # (the caller's tensors) alive as long as the instruction is remembered.
    raised = _copy.copy(err)  # message, notes and attributes; no traceback
    raised.__cause__ = err.__cause__
    try:
        raise raised
    finally:
        del raised  # this frame is in the copy's traceback: no cycle through its locals


def raise_pending() -> None:
    """Raise the oldest kernel error not yet reported (if any)."""
    if _errors:
        _raise(_errors[0])


def sync_read(storage: Storage) -> None:
    """Wait until ``storage`` can be read: its last writer has run. Raises that writer's error,
    else the oldest unreported kernel error."""
    x = storage.writer
    if x is not None:
        if not x.done:
            wait_for(x)
        if x.error is not None:
            _raise(x.error)
    if _errors:
        _raise(_errors[0])


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
    then raise the oldest unreported kernel error, if any."""
    _drain()
    if _errors:
        _raise(_errors[0])


def _drain() -> None:
    """Wait for every queued instruction (FIFO: the last one of each worker) and every
    deferred launch issued so far."""
    for w in _pool.all:
        tail = w.tail
        if tail:
            last = tail[-1]
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
    """A copy of the kernel errors not yet raised to the user."""
    return list(_errors)


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
    if _errors:
        sys.stderr.write(f"actorflow: {len(_errors)} kernel error(s) were never reported "
                         f"(no sync point read the failed results); the first:\n{_errors[0]}\n")
