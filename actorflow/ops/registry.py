"""The op registry: one record per op, shared by eager execution, tracing, passes and actors.

An op record holds
  * ``infer(inputs, attrs) -> list[Meta]``: output shapes and dtypes from input metas,
  * ``kernels[device_type](ins, outs, attrs)``: writes into the output arrays it is given,
  * ``grad(ctx, *douts) -> tuple``: the gradient rule, written with functional ops so it runs
    eagerly or emits lazy ops,
  * ``sbp``: a generator of SBP signatures (used by global tensors and the compiler),
  * ``view``: optional; returns an output that aliases the input (eager views share memory;
    the compiled runtime uses the kernel, which copies),
  * ``mutates``: indices of inputs the kernel writes in place (optimizer updates, running stats),
  * ``optional_outputs``: ``{bool attr: output index}`` for trailing outputs an attr switches on
    (gelu's saved Phi(x)); a Job pass switches them off where nothing reads them.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from actorflow.framework.dtype import dtype


class Meta(NamedTuple):
    """Shape and dtype of a blob; what inference works on."""

    shape: tuple
    dtype: dtype


class OpError(RuntimeError):
    """An op was called with inputs it cannot take (raised from shape/dtype inference)."""


class Op:
    """One registered op. See the module docstring for its parts."""

    __slots__ = ("name", "infer_fn", "kernels", "grad_fn", "sbp_fn", "view_fn", "mutates",
                 "grad_uses_outputs", "random", "n_outputs_hint", "kernel_cpu", "doc",
                 "mutates_fn", "optional_outputs")

    def __init__(self, name: str, *, mutates: tuple = (),
                 grad_uses_outputs: bool | tuple[int, ...] = False,
                 random: bool = False, optional_outputs: dict | None = None, doc: str = ""):
        self.name = name
        self.infer_fn: Callable | None = None
        self.kernels: dict[str, Callable] = {}
        self.kernel_cpu: Callable | None = None
        self.grad_fn: Callable | None = None
        self.sbp_fn: Callable | None = None
        self.view_fn: Callable | None = None
        self.mutates = tuple(mutates)
        self.grad_uses_outputs = grad_uses_outputs
        self.random = random  # the dispatcher draws attrs["seed"] from the global generator
        self.doc = doc
        self.mutates_fn: Callable | None = None  # (n_inputs, attrs) -> indices, when they vary
        self.optional_outputs = dict(optional_outputs or {})

    def mutated_inputs(self, n_inputs: int, attrs: dict) -> tuple:
        """Indices of the inputs one call with ``n_inputs`` inputs and ``attrs`` writes in
        place: ``mutates`` (those present), or what ``mutates_fn`` says for ops whose written
        inputs depend on the call (multi-tensor updates)."""
        if self.mutates_fn is not None:
            return tuple(self.mutates_fn(n_inputs, attrs))
        return tuple(i for i in self.mutates if i < n_inputs)

    # decorators -------------------------------------------------------------------------------
    def infer(self, fn: Callable) -> Callable:
        self.infer_fn = fn
        return fn

    def kernel(self, device_type: str = "cpu") -> Callable:
        def deco(fn):
            self.kernels[device_type] = fn
            if device_type == "cpu":
                self.kernel_cpu = fn
            return fn
        return deco

    def grad(self, fn: Callable) -> Callable:
        self.grad_fn = fn
        return fn

    def sbp(self, fn: Callable) -> Callable:
        self.sbp_fn = fn
        return fn

    def view(self, fn: Callable) -> Callable:
        self.view_fn = fn
        return fn

    def __repr__(self) -> str:
        return f"<op {self.name}>"


_REGISTRY: dict[str, Op] = {}


def register(name: str, **kw) -> Op:
    """Create and register a new op; registering a name twice is an error."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    op = Op(name, **kw)
    _REGISTRY[name] = op
    return op


def get(name: str) -> Op:
    """Look up a registered op by name."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} is registered") from None


def all_ops() -> dict[str, Op]:
    """A copy of the registry (name -> Op)."""
    return dict(_REGISTRY)


def fail(op_name: str, message: str, *shapes) -> None:
    """Raise an OpError naming the op and the shapes involved."""
    extra = ""
    if shapes:
        extra = " (shapes: " + ", ".join(str(tuple(s)) for s in shapes) + ")"
    raise OpError(f"{op_name}: {message}{extra}")
