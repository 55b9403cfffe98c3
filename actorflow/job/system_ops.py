"""The system ops of a Job: the one table of what each one is and does.

Besides registered ops, a Job holds ops the framework itself adds: ``input`` (one per tensor
argument of a graph call), ``variable`` (live state bound at run time), ``literal`` (a folded
constant), ``output`` (one per returned tensor) and gradient accumulation's ``micro_unpack``,
``micro_repeat``, ``micro_acc``, ``micro_pack`` (see ``actorflow.passes.grad_acc``).

Each row says everything other parts need, so no part keeps a list of its own:
  * ``task_kind``: the compiler's task kind, which is also the runtime's actor kind;
  * ``stream``: the stream (and so the actor thread) its task runs on;
  * ``stage``: its gradient-accumulation stage when it has a fixed one (``pre``: once per call
    before the micro-batches, ``post``: once after them), None when its stage tag says;
  * ``accumulates``: its result gathers all micro-batches (readers run after them);
  * ``memory``: where its output lives: ``input`` (the caller's array), ``state`` (a bound
    tensor), ``literal`` (the value in its attrs), ``alias`` (a view of its input blob) or
    ``own`` (memory of its own);
  * ``dce_root``: dead-op elimination keeps it even when nothing reads it;
  * ``dot_shape``: its Graphviz node shape;
  * ``follows_input``: how its output follows its input blob's description when that changes
    (a pass re-typing the Job): ``desc`` (shape and dtype), ``dtype`` (its own shape, the
    input's dtype) or None (it has no input);
  * ``reference``: what the reference executor does for it, ``fn(step, ctx)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from actorflow.errors import UnboundVariableError
from actorflow.tensor import unsynced_array


@dataclass(frozen=True)
class SystemOp:
    """One row of the system-op table (see the module docstring)."""

    name: str
    task_kind: str
    stream: str
    stage: str | None
    accumulates: bool
    memory: str
    dce_root: bool
    dot_shape: str
    follows_input: str | None
    reference: Callable

    def output_for(self, own, input_desc):
        """Its output description once its input is described by ``input_desc`` (``own``:
        the output description it has now)."""
        if self.follows_input == "desc":
            return input_desc
        if self.follows_input == "dtype":
            return type(own)(tuple(own.shape), input_desc.dtype)
        return own


def _input(s, ctx):
    pass  # the slot is filled before the steps run


def _variable(s, ctx):
    name = s.conf.attrs["name"]
    over = ctx.overrides.get(name) if ctx.overrides else None
    if over is not None:
        ctx.slots[s.outs[0]] = over
        return
    t = ctx.bindings.get(name)
    if t is None:
        raise UnboundVariableError(f"variable {name!r} has no tensor bound to it")
    ctx.slots[s.outs[0]] = unsynced_array(t)  # the graph call's VM instruction is ordered


def _literal(s, ctx):
    ctx.slots[s.outs[0]] = s.attrs["value"]


def _output(s, ctx):
    pass  # read after the run


def _unpack(s, ctx):
    whole = ctx.slots[s.ins[0]]
    k = whole.shape[0] // ctx.n
    ctx.slots[s.outs[0]] = whole[ctx.micro * k:(ctx.micro + 1) * k]


def _repeat(s, ctx):
    ctx.slots[s.outs[0]] = ctx.slots[s.ins[0]]


def _acc(s, ctx):
    v = ctx.slots[s.ins[0]]
    if ctx.micro == 0:
        total = np.array(v, dtype=s.descs[0].dtype.np, copy=True)
        ctx.acc[s.conf.name] = total
        ctx.slots[s.outs[0]] = total
    else:
        ctx.acc[s.conf.name] += v


def _pack(s, ctx):
    v = ctx.slots[s.ins[0]]
    if ctx.micro == 0:
        d = s.descs[0]
        ctx.acc[s.conf.name] = np.empty(d.shape, d.dtype.np)
        ctx.slots[s.outs[0]] = ctx.acc[s.conf.name]
    k = v.shape[0] if v.ndim else 1
    ctx.acc[s.conf.name][ctx.micro * k:(ctx.micro + 1) * k] = v


SYSTEM_OP_TABLE: dict[str, SystemOp] = {row.name: row for row in (
    #        name            task kind   stream     stage  accum  memory     root   dot
    #        follows input, reference
    SystemOp("input",        "input",    "io",      "pre", False, "input",   True,  "invhouse",
             None, _input),
    SystemOp("variable",     "variable", "compute", "pre", False, "state",   True,  "cylinder",
             None, _variable),
    SystemOp("literal",      "literal",  "compute", "pre", False, "literal", False, "note",
             None, _literal),
    SystemOp("output",       "output",   "compute", "post", False, "alias",  True,  "house",
             "desc", _output),
    SystemOp("micro_unpack", "unpack",   "compute", None,  False, "alias",   False, "box",
             "dtype", _unpack),
    SystemOp("micro_repeat", "repeat",   "compute", None,  False, "alias",   False, "box",
             "desc", _repeat),
    SystemOp("micro_acc",    "acc",      "compute", None,  True,  "own",     False, "box",
             "desc", _acc),
    SystemOp("micro_pack",   "pack",     "compute", None,  True,  "own",     False, "box",
             "dtype", _pack),
)}

SYSTEM_OPS = tuple(SYSTEM_OP_TABLE)


def is_system_op(op_type: str) -> bool:
    """True for the op types of the table (not registered ops)."""
    return op_type in SYSTEM_OP_TABLE


def system_op(op_type: str) -> SystemOp | None:
    """The table row of ``op_type``, or None for a registered op."""
    return SYSTEM_OP_TABLE.get(op_type)
