"""Autograd: one engine for eager and lazy modes (see ``engine``)."""
from actorflow.autograd.engine import backward, grad  # noqa: F401
from actorflow.autograd.function import Function, FunctionCtx  # noqa: F401
from actorflow.autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from actorflow.autograd import functional  # noqa: F401,E402  (vjp, jvp, jacobian, hessian, ...)
