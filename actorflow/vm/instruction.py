"""Instructions, the storage records that order them, and the error a failed kernel becomes.

An ``Instruction`` is one unit of work the VM runs on a worker thread: a callable with its
arguments, the storages it reads and writes, and what is needed to report a failure (the op
name, the module path and the Python stack of the call that issued it). A ``Storage`` is the
dependency record of one block of memory: the last instruction that writes it and the
instructions that read it since. Views share their base's ``Storage``.
"""
from __future__ import annotations

import linecache
import os
import sys
import traceback

from actorflow.errors import KernelError, kernel_failure, with_issue_site

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STACK_LIMIT = 14   # frames recorded at issue (from the op's caller outwards)


class Storage:
    """Dependency record of one block of memory (shared by all views of it).

    ``writer`` is the last instruction that writes it (``None``: none since it was created);
    ``readers`` the instructions that read it since that write. Only the VM's issue lock
    changes these fields.

    ``shared``: NumPy code outside the VM can reach this memory (``from_numpy``, ``as_tensor``,
    the array ``numpy()`` returns), so an instruction reading or writing it completes before
    its op returns: the caller may change or read the array right after, as in PyTorch.
    ``failed``: the error of a failed instruction that was to write this memory in place
    (the memory keeps its previous values); the next read reports it, if nothing did yet.
    """

    __slots__ = ("writer", "readers", "shared", "failed")

    def __init__(self):
        self.writer = None
        self.readers = None
        self.shared = False
        self.failed = None

    def __repr__(self) -> str:
        n = len(self.readers) if self.readers else 0
        return f"<Storage writer={self.writer!r} readers={n}>"


class Instruction:
    """One unit of VM work: ``fn(*args)`` on a stream, after its dependencies.

    ``after`` holds the writers it must follow (read-after-write, write-after-write: a failure
    there skips this instruction), ``war`` the readers a write must follow (write-after-read).
    ``done`` becomes True when it has run (or been skipped, or, when deferred, when its
    ``finish`` is called); ``error`` is then the ``KernelError`` that stops readers of what it
    writes.
    """

    __slots__ = ("fn", "args", "name", "stream", "after", "war", "done", "error", "stack",
                 "where", "shapes", "deferred", "waiters", "started", "chain", "launched",
                 "restore", "nbytes", "__weakref__")

    def __init__(self, fn, args, name: str, stream, where=None, shapes=None,
                 deferred: bool = False):
        self.fn = fn
        self.args = args
        self.name = name
        self.stream = stream
        self.after = None
        self.war = None
        self.done = False
        self.error = None
        self.stack = None
        self.where = where
        self.shapes = shapes
        self.deferred = deferred
        self.waiters = None  # locks of threads blocked in wait_for(self)
        self.started = False
        # deferred launches into one executor that orders its own work (a graph's runtime):
        # a later launch with the same ``chain`` need not wait for this one to complete, only
        # to be launched; ``launched`` turns True when ``fn(finish)`` has returned
        self.chain = None
        self.launched = False
        # (storage, previous writer) of what it writes in place: handed back if it fails
        self.restore = None
        self.nbytes = 0  # memory it allocated (its outputs): what back-pressure counts

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else ("done" if self.done else "pending")
        return f"<Instruction {self.name} on {self.stream!r}: {state}>"


def capture_stack(skip: int = 2, limit: int = _STACK_LIMIT) -> list:
    """The calling Python stack, innermost first, as a flat list ``[code, lasti, code, lasti,
    ...]`` (cheap: line numbers are looked up only when an error is formatted)."""
    try:
        f = sys._getframe(skip)
    except ValueError:
        return []
    out = []
    for _ in range(limit):
        if f is None:
            break
        out.append(f.f_code)
        out.append(f.f_lasti)
        f = f.f_back
    return out


def _line_of(code, lasti: int):
    for start, end, line in code.co_lines():
        if start <= lasti < end and line is not None:
            return line
    return code.co_firstlineno


def format_stack(stack: list | None) -> str:
    """The issuing call's stack as traceback lines (outermost first), framework frames left out
    unless nothing else is there."""
    if not stack:
        return "  (stack not recorded)\n"
    pairs = [(stack[i], stack[i + 1]) for i in range(0, len(stack), 2)]
    frames = [(c, i) for c, i in pairs if not c.co_filename.startswith(_PKG_DIR)]
    if not frames:
        frames = pairs
    lines = []
    for code, lasti in reversed(frames):
        lineno = _line_of(code, lasti)
        lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        src = linecache.getline(code.co_filename, lineno).strip()
        if src:
            lines.append(f"    {src}\n")
    return "".join(lines)


def make_error(ins: Instruction, exc: BaseException) -> KernelError:
    """The ``KernelError`` reporting that ``ins`` raised ``exc`` (a ``KernelError`` from a graph
    call keeps its op and gets the call site), with the stack of the call that issued it."""
    if not isinstance(exc, KernelError):
        where = ".".join(n for n in ins.where if n) if ins.where else ""
        shapes = None if ins.shapes is None else [a.shape for a in ins.shapes]
        exc = kernel_failure(ins.name, where, shapes, exc)
    stack = ins.stack
    if stack is None:  # ran inline on the issuing thread: that thread's stack is the one
        stack = capture_stack(2, limit=64)
    return with_issue_site(exc, format_stack(stack))


def detach_traceback(exc: BaseException | None, depth: int = 8) -> None:
    """Make a kept exception (and those chained to it) hold no frames: its traceback becomes
    a note (the same lines, printed after its message) and ``__traceback__`` is dropped.

    A kept traceback would keep every frame it passes through alive, and through each
    frame's ``f_back`` its callers too (the VM's, and the user's call that issued the op),
    each with its locals: the tensors, arrays and graphs of the failed call, for as long as
    the error is remembered."""
    seen = set()
    todo = [exc]
    while todo and len(seen) < depth:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        if tb is not None:
            lines = "".join(traceback.format_tb(tb)).rstrip("\n")
            e.add_note("Traceback of this exception (most recent call last):\n" + lines)
            e.__traceback__ = None
        todo.append(e.__cause__)
        todo.append(e.__context__)
