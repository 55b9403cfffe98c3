"""The exception a failed kernel becomes, wherever it ran.

A kernel that raises on a VM worker (eager ops, graph calls), in an actor of the runtime, or in
the reference executor surfaces as one ``KernelError`` whose message has one layout::

    <op>: kernel failed [in module <path>] (input shapes: <shapes>): <Type>: <message>
    The op was issued at (most recent call last):
      File "<the user's file>", line <n>, in <function>
        <the line>

``<op>`` is the op type, followed for an op of a graph by ``(op <name in the Job>)``; the
lines after the first say where the user's code issued the op (an eager op) or called the
graph (a graph op). The original exception is the ``__cause__``.
"""
from __future__ import annotations


class KernelError(RuntimeError):
    """A kernel failed (see the module docstring). ``issued_at`` is True once the message
    names the user's line."""

    issued_at = False


class RemoteRankError(KernelError):
    """A collective or transfer of a distributed graph call was abandoned: another rank's call
    of the same graph failed (its failure notice names the rank, op and module path), or the
    peer did not answer within ``ACTORFLOW_COMM_TIMEOUT``. ``from_notice`` is True in the
    first case (this rank did not fail itself, so it sends no notice of its own)."""

    from_notice = False


def kernel_failure(op: str, path: str, shapes, exc: BaseException) -> KernelError:
    """The ``KernelError`` for ``exc`` raised by the kernel of ``op`` (its label), called in
    module ``path`` on inputs of ``shapes`` (None: unknown); chained to ``exc``."""
    msg = f"{op}: kernel failed"
    if path:
        msg += f" [in module {path}]"
    if shapes is not None:
        msg += " (input shapes: " + ", ".join(str(tuple(s)) for s in shapes) + ")"
    err = KernelError(f"{msg}: {type(exc).__name__}: {exc}")
    err.__cause__ = exc
    return err


def with_note(err: KernelError, text: str) -> KernelError:
    """A new exception of ``err``'s type whose message is ``err``'s and, on a new line,
    ``text``; it keeps ``err``'s attributes (``issued_at``, ``from_notice``...) and its cause
    (``err`` itself when it had none)."""
    new = type(err)(f"{err}\n{text}")
    new.__dict__.update(err.__dict__)
    new.__cause__ = err.__cause__ if err.__cause__ is not None else err
    return new


def with_issue_site(err: KernelError, stack_text: str, what: str = "op") -> KernelError:
    """``err`` with the user's call site appended (once)."""
    if err.issued_at:
        return err
    new = with_note(err, f"The {what} was issued at (most recent call last):\n"
                         f"{stack_text}".rstrip("\n"))
    new.issued_at = True
    return new


class UnboundVariableError(RuntimeError):
    """A graph ran a ``variable`` op that has no tensor bound to it."""
