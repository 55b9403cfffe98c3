"""``actorflow.utils.checkpoint``: activation checkpointing for eager code.

``checkpoint(fn, *args)`` runs ``fn`` without recording autograd history, keeping only its
inputs; backward runs ``fn`` again with history (the random generator restored to its state
at the first run, so dropout draws the same masks) and backpropagates through that. Memory
held between forward and backward is the inputs instead of every intermediate of ``fn``.
(Inside an ``nn.Graph``, a module's ``activation_checkpointing`` option does this as a pass.)
"""
from __future__ import annotations

import warnings

from actorflow.autograd import Function, backward, enable_grad
from actorflow.random import get_rng_state, set_rng_state
from actorflow.tensor import Tensor


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng_state, *args):
        ctx.fn = fn
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        ctx.args = args
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return fn(*args)

    @staticmethod
    def backward(ctx, *douts):
        saved = iter(ctx.saved_tensors)
        inputs = []
        for a in ctx.args:
            if isinstance(a, Tensor):
                t = next(saved)
                inputs.append(t.detach().requires_grad_(t.requires_grad))
            else:
                inputs.append(a)
        current = get_rng_state() if ctx.rng_state is not None else None
        if current is not None:
            set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                out = ctx.fn(*inputs)
        finally:
            if current is not None:
                set_rng_state(current)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, d) for o, d in zip(outs, douts)
                 if isinstance(o, Tensor) and o.requires_grad and d is not None]
        if pairs:
            backward([o for o, _ in pairs], [d for _, d in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


def checkpoint(function, *args, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs):
    """``function(*args)``, recomputed during backward instead of keeping its activations.

    At least one tensor input should require grad, or no gradient flows through the call
    (also to parameters ``function`` uses), as with PyTorch's reentrant checkpoint."""
    if kwargs:
        raise ValueError(f"checkpoint: unexpected keyword arguments {sorted(kwargs)}; pass "
                         f"them through a closure")
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("checkpoint: none of the inputs requires grad, so the gradients of the "
                      "checkpointed call will be None", stacklevel=2)
    return _Checkpoint.apply(function, bool(preserve_rng_state), *args)


__all__ = ["checkpoint"]
