"""SGD, with optional momentum (OneFlow's semantics; see ``SGD``)."""
from __future__ import annotations

import warnings

from actorflow.ops import registry
from actorflow.optim.optimizer import Optimizer, zeros_state
from actorflow.tensor import Tensor

_SGD = registry.get("sgd_update")
_MOMENTUM = registry.get("momentum_update")


def check_nonnegative(**values) -> None:
    """Raise ``ValueError`` naming the first negative hyperparameter."""
    for name, v in values.items():
        if v < 0.0:
            raise ValueError(f"Invalid {name} value: {v}")


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with (Nesterov) momentum.

    With ``g = grad + weight_decay * p``:
    without momentum ``p -= lr * g``; with momentum the buffer starts at zero,
    ``buf = momentum * buf + (1 - dampening) * g``, ``d = g + momentum * buf`` (nesterov) or
    ``buf``, and ``p -= lr * d`` (``p += lr * d`` when ``maximize``). As in OneFlow, ``maximize``
    and ``nesterov`` take effect only with momentum > 0 (a warning says so; PyTorch refuses
    ``nesterov`` without momentum), and the first step damps the gradient too (PyTorch starts
    the buffer at the first gradient; the two agree when ``dampening == 0``).
    """

    def __init__(self, params, lr: float = 0.001, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False,
                 contiguous_params: bool = False, fused: bool = False):
        check_nonnegative(**{"learning rate": lr, "momentum": momentum,
                             "weight_decay": weight_decay})
        if maximize and momentum == 0.0:
            warnings.warn("SGD: maximize takes effect only with momentum > 0", stacklevel=2)
        if nesterov and momentum == 0.0:  # OneFlow takes it (PyTorch raises): a plain step
            warnings.warn("SGD: nesterov takes effect only with momentum > 0", stacklevel=2)
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, contiguous_params=contiguous_params,
                                      fused=fused))

    def _attrs(self, group: dict) -> dict:
        if group["momentum"] == 0.0:
            return {"weight_decay": float(group["weight_decay"])}
        return {"momentum": float(group["momentum"]), "dampening": float(group["dampening"]),
                "nesterov": bool(group["nesterov"]), "maximize": bool(group["maximize"]),
                "weight_decay": float(group["weight_decay"])}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        if "momentum" not in attrs:
            self._apply_update(_SGD, [param, grad, lr], attrs)
            return
        state = self.state[param]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = zeros_state(param)
        self._apply_update(_MOMENTUM, [param, grad, lr, state["momentum_buffer"]], attrs)
