"""``actorflow.autograd.Function``: user-defined forward/backward pairs."""
from __future__ import annotations

from actorflow.autograd import grad_mode
from actorflow.autograd.engine import Node
from actorflow.ops._common import F
from actorflow.tensor import Tensor


class FunctionCtx:
    """The ``ctx`` of a custom Function: save tensors in forward, read them in backward."""

    def __init__(self):
        self.saved_tensors: tuple = ()
        self.needs_input_grad: tuple = ()
        self._non_differentiable: set = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self._versions = [t._vc[0] if isinstance(t, Tensor) else None for t in tensors]
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:  # noqa: F811
        if getattr(self, "_released", False) and getattr(self, "_n_freed", 0):
            raise RuntimeError("autograd.Function: trying to backward through the graph a second "
                               "time (or to read saved tensors after they were freed); pass "
                               "retain_graph=True to the first backward()")
        saved = getattr(self, "_saved", ())
        for t, v in zip(saved, getattr(self, "_versions", ())):
            if isinstance(t, Tensor) and t._vc[0] != v:
                raise RuntimeError("autograd.Function: a tensor saved for backward was modified "
                                   "by an in-place operation")
        return saved

    @saved_tensors.setter
    def saved_tensors(self, value) -> None:
        self._saved = tuple(value)
        self._versions = [None] * len(self._saved)

    def _release(self) -> None:
        """Drop the saved tensors (after a backward that did not retain the graph); reading
        them later raises (when there were any)."""
        self._n_freed = getattr(self, "_n_freed", 0) + len(getattr(self, "_saved", ()))
        self._saved = ()
        self._versions = []
        self._released = True

    def _is_data_valid(self) -> bool:
        """False once backward has released what this ctx saved."""
        return not getattr(self, "_released", False)

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class _FunctionNode(Node):
    """Autograd node for a custom Function: backward calls the user's ``backward``."""

    __slots__ = ("fn_cls", "ctx", "tensor_positions", "n_args")

    def name(self) -> str:
        return f"{self.fn_cls.__name__}_backward"

    def apply(self, douts: list) -> tuple:
        # released: runs again unless backward reads ctx.saved_tensors (which then raises)
        if self.ctx.materialize_grads:
            # the functional API sits above autograd: through the op layer's late binding
            douts = [d if d is not None else F.zeros(m[0], dtype=m[1])
                     for d, m in zip(douts, self.output_metas)]
        try:  # user code: failures come back naming the Function, the original chained
            return self._tensor_grads(self.fn_cls.backward(self.ctx, *douts))
        except Exception as e:
            raise RuntimeError(f"{self.name()}: backward of custom Function "
                               f"{self.fn_cls.__name__} failed: {type(e).__name__}: {e}") from e

    def _tensor_grads(self, grads) -> tuple:
        """One gradient per forward argument in, one per tensor argument out."""
        if not isinstance(grads, tuple):
            grads = (grads,)
        name = self.fn_cls.__name__
        if len(grads) < self.n_args or any(g is not None for g in grads[self.n_args:]):
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {self.n_args}, got {len(grads)})")
        for i, g in enumerate(grads[:self.n_args]):
            if g is not None and i not in self.tensor_positions:
                raise RuntimeError(f"function {name} returned a gradient different from None "
                                   f"at position {i}, but that forward input is not a Tensor")
        return tuple(grads[i] for i in self.tensor_positions)

    def release(self) -> None:
        super().release()
        self.ctx._release()


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call
    ``MyFunction.apply(*args)``."""

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with grad_mode.no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        # an input returned as-is becomes a new tensor object, so the input keeps its history
        outs = tuple(o.detach() if isinstance(o, Tensor) and any(o is a for a in tensor_args)
                     else o for o in outs)
        out = outs[0] if single else outs
        if grad_mode.is_grad_enabled() and any(t.requires_grad for t in tensor_args):
            node = _FunctionNode.__new__(_FunctionNode)
            Node.__init__(node, None, {}, tensor_args, [o for o in outs if isinstance(o, Tensor)])
            node.fn_cls, node.ctx = cls, ctx
            node.tensor_positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
            node.n_args = len(args)
            k = 0
            for o in outs:
                if isinstance(o, Tensor):
                    if id(o) not in ctx._non_differentiable and o.dtype.is_differentiable:
                        o.requires_grad = True
                        o.grad_fn = node
                        o._out_idx = k
                    k += 1
        return out

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("autograd.Function subclasses must define forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("autograd.Function subclasses must define backward")
