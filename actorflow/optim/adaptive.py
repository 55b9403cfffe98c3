"""RMSprop, Adagrad and Adadelta (per-element adaptive learning rates)."""
from __future__ import annotations

from actorflow.ops import registry
from actorflow.optim.optimizer import Optimizer, step_state, zeros_state
from actorflow.optim.sgd import check_nonnegative
from actorflow.tensor import Tensor

_RMSPROP = registry.get("rmsprop_update")
_ADAGRAD = registry.get("adagrad_update")
_ADADELTA = registry.get("adadelta_update")


class RMSprop(Optimizer):
    """RMSprop in OneFlow's form: ``sq = alpha*sq + (1-alpha)*g^2``,
    ``denom = sqrt(sq + eps)`` (``sqrt(sq - grad_avg^2 + eps)`` when ``centered``),
    ``buf = momentum*buf + lr*g/denom``, ``p -= buf``. PyTorch adds ``eps`` after the square root
    and scales the buffer by lr afterwards; with a constant lr the two differ only through eps.
    ``g`` is the gradient plus ``weight_decay * p`` (negated first when ``maximize``)."""

    def __init__(self, params, lr: float = 0.001, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 maximize: bool = False, contiguous_params: bool = False):
        check_nonnegative(**{"learning rate": lr, "alpha": alpha, "epsilon": eps,
                             "weight_decay": weight_decay, "momentum": momentum})
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      contiguous_params=contiguous_params))

    def _attrs(self, group: dict) -> dict:
        return {"alpha": float(group["alpha"]), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]),
                "momentum": float(group["momentum"]), "centered": bool(group["centered"]),
                "maximize": bool(group.get("maximize", False))}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        if "square_avg" not in state:
            state["square_avg"] = zeros_state(param)
        inputs = [param, grad, lr, state["square_avg"]]
        for key, used in (("grad_avg", attrs["centered"]), ("momentum_buffer", attrs["momentum"])):
            if used:
                if key not in state:
                    state[key] = zeros_state(param)
                inputs.append(state[key])
        self._apply_update(_RMSPROP, inputs, attrs)


class Adagrad(Optimizer):
    """Adagrad: ``sum += g^2``, ``p -= lr / (1 + (step-1)*lr_decay) * g / (sqrt(sum) + eps)``,
    with ``sum`` starting at ``initial_accumulator_value`` and ``g`` the gradient plus
    ``weight_decay * p`` (negated first when ``maximize``)."""

    def __init__(self, params, lr: float = 0.001, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, maximize: bool = False, contiguous_params: bool = False):
        check_nonnegative(**{"learning rate": lr, "lr_decay": lr_decay,
                             "weight_decay": weight_decay,
                             "initial_accumulator_value": initial_accumulator_value,
                             "epsilon": eps})
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize,
                                      contiguous_params=contiguous_params))

    def _attrs(self, group: dict) -> dict:
        return {"lr_decay": float(group["lr_decay"]), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]),
                "maximize": bool(group.get("maximize", False))}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        if "step" not in state:
            state["step"] = step_state(param)
        if "sum" not in state:
            state["sum"] = zeros_state(param, float(group["initial_accumulator_value"]))
        self._apply_update(_ADAGRAD, [param, grad, lr, state["step"], state["sum"]], attrs)


class Adadelta(Optimizer):
    """Adadelta: ``sq = rho*sq + (1-rho)*g^2``,
    ``delta = sqrt(acc + eps) / sqrt(sq + eps) * g``, ``acc = rho*acc + (1-rho)*delta^2``,
    ``p -= lr * delta``; ``g`` is the gradient (negated when ``maximize``) plus
    ``weight_decay * p``."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, maximize: bool = False,
                 contiguous_params: bool = False):
        check_nonnegative(**{"learning rate": lr, "epsilon": eps, "weight_decay": weight_decay})
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, contiguous_params=contiguous_params))

    def _attrs(self, group: dict) -> dict:
        return {"rho": float(group["rho"]), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]),
                "maximize": bool(group.get("maximize", False))}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        for key in ("square_avg", "acc_delta"):
            if key not in state:
                state[key] = zeros_state(param)
        self._apply_update(_ADADELTA, [param, grad, lr, state["square_avg"], state["acc_delta"]],
                           attrs)
