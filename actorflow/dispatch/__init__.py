"""Dispatch: every functional op call comes through ``apply`` and goes to one interpreter.

An interpreter has one method, ``apply(op, inputs, attrs, out, record) -> (results,
node_inputs, node_outputs)``: it runs (or records) the op and says what autograd should record
(the inputs as the gradient rule must see them: an in-place call's pre-op values; the outputs
the node produces). After whichever interpreter ran, ``apply`` records the autograd node once.

* eager-local (``dispatch/eager.py``, every thread's default): infer, issue the kernel to the VM;
* lazy (``dispatch/lazy.py``, set on the thread while ``nn.Graph`` traces ``build``): add the op
  to the Job being built and return lazy tensors.

The interpreter is chosen per call from the thread's scope (``actorflow.scope``), so the same
functional code (user code, gradient rules, optimizer updates) runs in every mode. Global
tensors will get an eager-global interpreter chosen here the same way.
"""
from __future__ import annotations

from actorflow.autograd import grad_mode
from actorflow.dispatch.common import check_inplace, infer, record
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.ops.registry import Meta, Op
from actorflow.scope import current_interpreter, interpreter_scope, state as _scope_state
from actorflow.tensor import EagerBlob

_grad = grad_mode._state
EAGER = EagerInterpreter()


def apply(op: Op, inputs: list, attrs: dict, out: list | None = None) -> list:
    """Run ``op`` on tensors ``inputs`` with ``attrs``; returns the output tensors.

    ``out`` (in-place ops) names existing tensors to write the outputs into. Autograd records
    a node when grad mode is on, the op has a gradient rule and an input requires grad.
    """
    rec = _grad.enabled and op.grad_fn is not None and any(t.requires_grad for t in inputs)
    interp = _scope_state.interpreter
    results, node_inputs, node_outputs = (EAGER if interp is None else interp).apply(
        op, inputs, attrs, out, rec)
    if rec:
        record(op, node_inputs, node_outputs, attrs)
    return results


__all__ = ["apply", "infer", "check_inplace", "record", "current_interpreter",
           "interpreter_scope", "EAGER", "EagerInterpreter", "Meta", "EagerBlob"]
