"""What ``build()`` does to its input tensors besides reading them, made to reach the caller as
in eager mode: an in-place write to an input (``x.add_(1)``) is copied into the caller's tensor
after each call, and the gradient ``backward()`` leaves on an input that requires grad is
accumulated into its ``.grad``.

Both travel as extra outputs of the Job, after the outputs ``build`` returned; ``apply`` runs
the copies and accumulations as eager ops, ordered after the call by the VM.
"""
from __future__ import annotations

from actorflow.autograd import grad_mode
from actorflow.tensor import Tensor

WRITE, GRAD = "write", "grad"


def input_blobs(lazy_inputs: list) -> list:
    """The blob each traced input reads before ``build`` runs (to see later which it wrote)."""
    return [getattr(t._h, "name", None) for t in lazy_inputs]


def add_effect_outputs(b, graph_name: str, lazy_inputs: list, blobs: list, paths: list,
                       first_index: int, micro_batched: bool) -> list:
    """Add an output per input ``build`` wrote in place (its final value) and per input whose
    gradient ``backward()`` computed; returns ``(kind, input index, output index)`` for each.
    ``micro_batched``: the inputs were split for gradient accumulation (then neither effect is
    supported and raises)."""
    effects = []
    index = first_index
    for i, (t, blob, path) in enumerate(zip(lazy_inputs, blobs, paths)):
        written = getattr(t._h, "name", None) != blob
        has_grad = t.requires_grad and t._grad is not None
        if (written or has_grad) and micro_batched:
            what = "writes input" if written else "computes the gradient of input"
            raise RuntimeError(f"nn.Graph {graph_name}: build() {what} {path}, which gradient "
                               f"accumulation splits into micro-batches; the caller's tensor "
                               f"can't receive it: set config.set_gradient_accumulation_steps(1) "
                               f"or detach the input")
        if written:
            b.add_output(index, f"_written.{path}", t)
            effects.append((WRITE, i, index))
            index += 1
        if has_grad:
            b.add_output(index, f"_grad.{path}", b.lazy_of(t._grad))
            effects.append((GRAD, i, index))
            index += 1
    return effects


def apply(effects: list, inputs: list, outputs: list) -> None:
    """After a call: copy written inputs' values into the caller's tensors and accumulate
    input gradients into their ``.grad`` (eager ops, after the call in VM order)."""
    for kind, i, j in effects:
        t, value = inputs[i], outputs[j]
        if kind == WRITE:
            with grad_mode.no_grad():
                t.copy_(value)
        else:
            g = Tensor._from_handle(value._h, tuple(value._shape), value.dtype)
            t.grad = g if t.grad is None else (t.grad + g).detach()
