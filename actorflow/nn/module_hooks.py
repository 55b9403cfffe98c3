"""Module backward hooks: ``hook(module, grad_input, grad_output)`` after the gradients with
respect to a module call's tensor inputs are computed.

A call of a module with backward hooks passes its tensor inputs through one identity
``Function`` and its tensor outputs through another. The outputs' backward records
``grad_output``; the inputs' backward sees ``grad_input``, runs the hooks (a hook may return
replacement gradients) and passes the result on. When no input requires grad, the hooks run
in the outputs' backward with ``grad_input`` all None (as in PyTorch).

``RemovableHandle`` (returned by every ``Module.register_*_hook``) and ``_add_hook`` serve all
of a module's hook dicts (moved here from ``nn/module.py``).
"""
from __future__ import annotations

import itertools
import weakref
from typing import Callable

from actorflow.autograd import Function
from actorflow.tensor import Tensor


class _CallState:
    __slots__ = ("module", "hooks", "grad_output", "n_inputs")

    def __init__(self, module, hooks: list):
        self.module, self.hooks = module, hooks
        self.grad_output: tuple = ()
        self.n_inputs = 0

    def run(self, grad_input: tuple) -> tuple:
        for hook in self.hooks:
            res = hook(self.module, grad_input, self.grad_output)
            if res is None:
                continue
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_input):
                raise RuntimeError(f"backward hook of {type(self.module).__name__} returned "
                                   f"{len(res)} gradients, expected {len(grad_input)}")
            grad_input = res
        return grad_input


class _HookInputs(Function):
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.state.run(tuple(grads)))


class _HookOutputs(Function):
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        state.grad_output = tuple(grads)
        if state.n_inputs == 0:
            state.run((None,))
        return (None,) + tuple(grads)


def _swap(values, positions: list, new: tuple):
    values = list(values)
    for i, t in zip(positions, new):
        values[i] = t
    return values


def wrap_inputs(module, hooks: list, args: tuple):
    """``(state, args)``: the tensor args requiring grad routed through the input hook."""
    state = _CallState(module, hooks)
    pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    state.n_inputs = len(pos)
    if pos:
        args = tuple(_swap(args, pos, _HookInputs.apply(state, *(args[i] for i in pos))))
    return state, args


def wrap_outputs(state: _CallState, result):
    """``result`` with its tensors requiring grad routed through the output hook."""
    single = isinstance(result, Tensor)
    outs = (result,) if single else result
    if not isinstance(outs, (tuple, list)):
        return result
    pos = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not pos:
        return result
    new = _swap(outs, pos, _HookOutputs.apply(state, *(outs[i] for i in pos)))
    return new[0] if single else type(outs)(new)


class RemovableHandle:
    """Returned by ``register_*_hook``; ``remove()`` unregisters the hook."""

    _next_id = itertools.count()

    def __init__(self, hooks: dict, flags: set):
        self.id = next(RemovableHandle._next_id)
        self._hooks = self.hooks_dict_ref = weakref.ref(hooks)  # PyTorch's public name
        self._flags = weakref.ref(flags)

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        hooks, flags = self._hooks(), self._flags()
        if hooks is not None:
            hooks.pop(self.id, None)
        if flags is not None:
            flags.discard(self.id)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _add_hook(hooks: dict, hid: int, hook: Callable, prepend: bool) -> None:
    hooks[hid] = hook
    if prepend:
        hooks.move_to_end(hid, last=False)
