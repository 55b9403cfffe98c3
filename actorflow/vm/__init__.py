"""The eager virtual machine: eager ops become instructions run by worker threads.

The dispatcher infers shapes and records autograd on the caller's thread, allocates the
outputs and issues the kernel as an ``Instruction``; a worker thread runs it once the storages
it reads and writes are ready. ``Tensor._array()`` is the sync point that waits for a
tensor's producer. See ``docs/architecture.md`` ("The eager VM") for the whole design.

The API a graph launch (or any other asynchronous producer) uses:

    ins = vm.launch(fn, reads=[blob_or_tensor, ...], writes=[...], name="graph")

runs ``fn()`` as an instruction after the last writers of ``reads`` and after every earlier
access to ``writes``; later readers of ``writes`` wait for it. With ``deferred=True``, ``fn``
is called as ``fn(finish)`` and the instruction (so every storage it writes) completes only
when ``finish()`` is called, from any thread, e.g. by a sink actor's callback;
``finish(exc)`` fails it instead. Output blobs completed that way are plain
``EagerBlob(np.empty(...))`` handles passed in ``writes``.
"""
from __future__ import annotations

from actorflow.vm.blas import shorten_blas_spin
from actorflow.vm.instruction import Instruction, KernelError, Storage
from actorflow.vm.memory import TUNING_VAR, no_huge_pages, tune_malloc
from actorflow.vm.scheduler import (
    BLOCKING_VAR, INLINE_VAR, _raise, current_worker, is_blocking, issue, pool, pop_worker,
    push_worker, set_blocking, sync_read, sync_write, synchronize, throttle, unreported_errors,
    wait_for,
)
from actorflow.vm.interrupts import deferred_interrupts
from actorflow.vm.worker import DEFAULT_LIMIT, LIMIT_VAR, STREAM_KINDS, Stream, Worker

tune_malloc()  # freed tensor memory stays in the process (see actorflow/vm/memory.py)
no_huge_pages()  # large arrays without NumPy's huge pages (ditto)
shorten_blas_spin()  # idle BLAS threads sleep instead of spinning (see actorflow/vm/blas.py)


def _storage_of(x) -> Storage:
    if isinstance(x, Storage):
        return x
    s = getattr(x, "storage", None)  # an EagerBlob
    if s is None:
        h = getattr(x, "_h", None)   # a Tensor
        s = getattr(h, "storage", None)
    if not isinstance(s, Storage):
        raise TypeError(f"vm.launch: expected eager tensors, EagerBlobs or Storages in reads / "
                        f"writes, got {type(x).__name__}")
    return s


def launch(fn, reads=(), writes=(), name: str = "launch", *, args: tuple = (),
           stream: str = "launch", deferred: bool = False, chain=None,
           creates=(), small: bool = False, nbytes: int = 0,
           throttle: bool = True) -> Instruction:
    """Run ``fn(*args)`` (``fn(finish, *args)`` when ``deferred``) as a VM instruction on the
    current worker's ``stream``, ordered by the storages it ``reads`` and ``writes`` (eager
    tensors, ``EagerBlob``s or ``Storage``s). Returns the ``Instruction``; ``wait(ins)`` blocks
    until it completes and raises its error.

    ``fn`` runs on a worker thread: it must not wait for results of instructions issued after
    it on the same worker (that raises), and a deferred launch's ``finish`` must not depend on
    them either (they run only after it is launched, but they may be waiting for it).

    ``chain``: deferred launches with the same (non-None) ``chain`` go to one executor that
    orders their work itself (a graph's actor runtime: iteration k+1 reads a parameter only
    after iteration k's update). Such a launch waits for an earlier one of its chain only until
    that one is launched, not until it completes, so several can be in flight.

    ``creates``: blobs whose memory this instruction fills for the first time (outputs, not
    yet read by anything). If it fails, they carry its error; what it ``writes`` in place gets
    its previous writer back (readable, with whatever the instruction wrote before failing).

    ``small``: quick work that may run on the calling thread when the worker has nothing
    queued and no dependency is pending (what the worker would do at that moment, without the
    hand-off).

    ``nbytes``: the memory the instruction holds until it completes (arrays it allocated or
    keeps alive), counted by back-pressure: issuing waits while a worker's queued
    instructions hold more than ``scheduler.MAX_QUEUED_BYTES`` (``throttle=False``: the caller
    calls ``throttle()`` itself, after bookkeeping that must not be interrupted)."""
    r = [_storage_of(x) for x in reads]
    w = [_storage_of(x) for x in writes]
    c = [_storage_of(x) for x in creates]
    return issue(fn, tuple(args), reads=r, writes=w, name=name, fresh=c, kind=stream,
                 deferred=deferred, chain=chain, small=small, nbytes=nbytes,
                 throttle=throttle)


def wait(ins: Instruction) -> None:
    """Block until ``ins`` completes; raise its ``KernelError`` if it failed."""
    if not ins.done:
        wait_for(ins)
    if ins.error is not None:
        _raise(ins.error)


__all__ = ["Instruction", "KernelError", "Storage", "Stream", "Worker", "launch", "wait",
           "issue", "synchronize", "sync_read", "sync_write", "is_blocking", "set_blocking",
           "current_worker", "push_worker", "pop_worker", "pool", "unreported_errors",
           "BLOCKING_VAR", "INLINE_VAR", "LIMIT_VAR", "TUNING_VAR", "tune_malloc",
           "shorten_blas_spin", "throttle", "deferred_interrupts",
           "DEFAULT_LIMIT", "STREAM_KINDS"]
