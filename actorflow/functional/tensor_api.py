"""Tensor API odds and ends: ``in`` (``__contains__``), OneFlow's
post-accumulation gradient hooks, memory formats (``flow.contiguous_format``,
``flow.channels_last``, ``flow.preserve_format``) and ``Tensor.to(memory_format=...)``."""
from __future__ import annotations

from actorflow.autograd.engine import RemovableHandle
from actorflow.functional.elementwise import clone, eq
from actorflow.functional.reduce import any as _any
from actorflow.functional.shape import contiguous, permute
from actorflow.tensor import Tensor, register_tensor_methods


class memory_format:
    """A memory layout name (``flow.contiguous_format``, ``flow.channels_last``,
    ``flow.preserve_format``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"actorflow.{self.name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
preserve_format = memory_format("preserve_format")


def _to_memory_format(self: Tensor, fmt: memory_format) -> Tensor:
    """``self`` in layout ``fmt``. As in OneFlow, ``channels_last`` moves dim 1 of a 4-D
    tensor last in the shape (NCHW -> NHWC, contiguous), rather than only in the strides."""
    if fmt is preserve_format:
        return self
    if fmt is contiguous_format:
        return contiguous(self)
    if fmt is channels_last:
        if len(self._shape) != 4:
            raise RuntimeError(f"to(memory_format=channels_last): expects a 4-D tensor, got "
                               f"shape {tuple(self._shape)}")
        return clone(permute(self, (0, 2, 3, 1)))  # a fresh NHWC layout (size-1 dims too)
    raise TypeError(f"to(): memory_format must be a flow memory format, got {fmt!r}")


def _contains(self: Tensor, value) -> bool:
    """``value in tensor``: whether any element equals ``value`` (a number or tensor)."""
    return bool(_any(eq(self, value)).item())


def register_post_accumulate_grad_hook(self: Tensor, hook):
    """Call ``hook(tensor)`` once this leaf's ``.grad`` is final in a backward (accumulated),
    inside the engine's walk, while the rest of backward is still being issued (PyTorch's
    API; the hook returns None). Returns a handle whose ``remove()`` unregisters it."""
    if self.grad_fn is not None or not self.requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: post-accumulation hooks can "
                           "only be registered on leaf tensors that require grad")
    hooks = self.__dict__.setdefault("_post_accumulate_grad_hooks", [])
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def _register_post_grad_accumulation_hook(self: Tensor, hook) -> None:
    """Call ``hook(grad)`` after each backward accumulated into this leaf's ``.grad``; a
    returned tensor replaces ``.grad`` (OneFlow's API, on top of
    ``register_post_accumulate_grad_hook``)."""
    if self.grad_fn is not None:
        raise RuntimeError("post-accumulation hooks can only be registered on leaf tensors")

    def on_leaf(t: Tensor) -> None:
        r = hook(t._grad)
        if r is not None:
            t._grad = r

    self.__dict__.setdefault("_post_accumulate_grad_hooks", []).append(on_leaf)


register_tensor_methods({
    "__contains__": _contains,
    "_register_post_grad_accumulation_hook": _register_post_grad_accumulation_hook,
    "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
    "_to_memory_format": _to_memory_format,
})

__all__ = ["memory_format", "contiguous_format", "channels_last", "preserve_format"]
