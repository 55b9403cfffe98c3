"""Dispatch: every functional op call comes through ``apply`` and goes to one interpreter.

An interpreter has one method, ``apply(op, inputs, attrs, out, record) -> (results,
node_inputs, node_outputs, then)``: it runs (or records) the op and says what autograd should
record (the inputs as the gradient rule must see them: an in-place call's pre-op values; the
outputs the node produces), and ``then`` (None, or what it must still do once the node exists:
the eager interpreters rebase the histories of a written view and its base,
``dispatch/copy_slices.py``; the lazy ones write a traced write through a view back into its
base and note the views a view op made, ``dispatch/lazy_views.py``). ``apply`` only chooses
the interpreter, records the autograd node once and calls ``then``.

* eager-local (``dispatch/eager.py``, every thread's default): infer, issue the kernel to the VM;
* lazy (``dispatch/lazy.py``, set on the thread while ``nn.Graph`` traces ``build``): add the op
  to the Job being built and return lazy tensors;
* eager-global (``dispatch/global_tensor.py``, chosen when an input is a global tensor): box
  the shards to an SBP signature of the op and run the eager-local path on them;
* meta (``dispatch/meta.py``, chosen when an input or in-place output is on the meta device):
  inference only, meta tensors out.
* lazy-global (``dispatch/lazy_global.py``, chosen when an input is global while a Graph
  traces): append the boxing ops and the op on this rank's shards to the Job.

Under ``flow.autocast`` (``dispatch/autocast.py``) ``apply`` first casts the inputs by the op's
``amp`` class, on the calling thread, whichever interpreter then runs the call.

The interpreter is chosen per call from the thread's scope (``actorflow.scope``), so the same
functional code (user code, gradient rules, optimizer updates) runs in every mode.
"""
from __future__ import annotations

from actorflow.autograd import grad_mode
from actorflow.dispatch.common import check_inplace, infer, record
from actorflow.dispatch.eager import EagerInterpreter
from actorflow.dispatch import autocast, lazy_global
from actorflow.dispatch.global_tensor import GLOBAL, GlobalBlob, GlobalInterpreter
from actorflow.dispatch.meta import META, MetaInterpreter
from actorflow.dispatch.lazy_global import LazyGlobalBlob
from actorflow.ops.registry import Meta, Op
from actorflow.scope import current_interpreter, interpreter_scope, state as _scope_state
from actorflow.tensor import DeviceMetaBlob, EagerBlob, Tensor

_grad = grad_mode._state
_autocast = autocast.state
EAGER = EagerInterpreter()


def apply(op: Op, inputs: list, attrs: dict, out: list | None = None) -> list:
    """Run ``op`` on tensors ``inputs`` with ``attrs``; returns the output tensors.

    ``out`` (in-place ops) names existing tensors to write the outputs into. Autograd records
    a node when grad mode is on, the op has a gradient rule and an input requires grad.
    While ``flow.autocast`` is on for the CPU, the inputs first get the casts of
    ``dispatch/autocast.py``.
    """
    try:
        if _autocast.enabled and out is None and _autocast.device_type == "cpu":
            inputs = autocast.cast_inputs(op, inputs, attrs)  # decided here, on this thread
        rec = _grad.enabled and op.grad_fn is not None and any(t.requires_grad for t in inputs)
        interp = _scope_state.interpreter
        for t in inputs:
            kind = type(t._h)
            if kind is GlobalBlob or kind is LazyGlobalBlob:
                if interp is not None:  # a Graph traces: the lazy-global interpreter
                    interp = lazy_global.interpreter_for(interp)
                elif kind is LazyGlobalBlob:
                    raise RuntimeError(f"{op.name}: tensor {t._h.name} is a lazy tensor of an "
                                       f"nn.Graph trace that has ended")
                else:
                    interp = GLOBAL
                break
            if kind is DeviceMetaBlob and interp is None:
                interp = META
                break
        else:
            if out is not None and interp is None:
                kinds = {type(t._h) for t in out}
                interp = GLOBAL if GlobalBlob in kinds else \
                    META if DeviceMetaBlob in kinds else None
    except AttributeError:  # an input that is no Tensor (checked only after the error)
        _check_tensors(op, inputs)
        raise
    results, node_inputs, node_outputs, then = (EAGER if interp is None else interp).apply(
        op, inputs, attrs, out, rec)
    if rec:
        record(op, node_inputs, node_outputs, attrs)
    if then is not None:  # the interpreter's work that needs the node recorded
        then()
    return results


def _check_tensors(op: Op, inputs: list) -> None:
    """A TypeError naming the op and the argument when an input is not a Tensor (a module
    called with a string, a list where a tensor belongs)."""
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op.name}: input {i} must be a Tensor, got {type(t).__name__}"
                            f"{' ' + repr(t)[:60] if isinstance(t, (str, int, float)) else ''}")


__all__ = ["apply", "infer", "check_inplace", "record", "current_interpreter",
           "interpreter_scope", "EAGER", "EagerInterpreter", "GLOBAL", "GlobalInterpreter",
           "META", "MetaInterpreter",
           "Meta", "EagerBlob"]
