"""Adam, AdamW and LAMB (all keep first and second moment estimates)."""
from __future__ import annotations

from actorflow.ops import registry
from actorflow.optim.optimizer import Optimizer, step_state, zeros_state
from actorflow.optim.sgd import check_nonnegative
from actorflow.tensor import Tensor

_ADAM = registry.get("adam_update")
_LAMB = registry.get("lamb_update")


def _check_betas(betas) -> None:
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {b}")


def _moments(state: dict, param: Tensor) -> None:
    if "step" not in state:
        state["step"] = step_state(param)
    if "exp_avg" not in state:
        state["exp_avg"] = zeros_state(param)
    if "exp_avg_sq" not in state:
        state["exp_avg_sq"] = zeros_state(param)


class Adam(Optimizer):
    """Adam: ``m = b1*m + (1-b1)*g``, ``v = b2*v + (1-b2)*g^2``,
    ``p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)`` with ``bc_i = 1 - b_i^step``
    (1 when ``do_bias_correction`` is False). ``weight_decay`` is an L2 term added to the
    gradient; ``amsgrad`` uses the running maximum of ``v``; ``maximize`` ascends."""

    _decoupled = False

    def __init__(self, params, lr: float = 0.001, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, do_bias_correction: bool = True,
                 maximize: bool = False, contiguous_params: bool = False, fused: bool = False):
        check_nonnegative(**{"learning rate": lr, "epsilon": eps, "weight_decay": weight_decay})
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      do_bias_correction=do_bias_correction, maximize=maximize,
                                      contiguous_params=contiguous_params, fused=fused))

    def _attrs(self, group: dict) -> dict:
        b1, b2 = group["betas"]
        return {"beta1": float(b1), "beta2": float(b2), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]), "decoupled": self._decoupled,
                "amsgrad": bool(group["amsgrad"]),
                "bias_correction": bool(group["do_bias_correction"]),
                "maximize": bool(group.get("maximize", False))}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        _moments(state, param)
        inputs = [param, grad, lr, state["step"], state["exp_avg"], state["exp_avg_sq"]]
        if attrs["amsgrad"]:
            if "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = zeros_state(param)
            inputs.append(state["max_exp_avg_sq"])
        self._apply_update(_ADAM, inputs, attrs)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam step."""

    _decoupled = True


class LAMB(Optimizer):
    """LAMB (layer-wise adaptive moments), OneFlow's form: the Adam direction
    ``u = m_hat / (sqrt(v_hat) + eps)`` is scaled by the trust ratio ``||p|| / ||u||`` (1 when
    either norm is 0): ``p -= lr * trust * (u + weight_decay * p)``. With
    ``adam_w_mode=False`` weight decay is an L2 term on the gradient instead."""

    def __init__(self, params, lr: float = 0.001, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, adam_w_mode: bool = True,
                 do_bias_correction: bool = True, amsgrad: bool = False,
                 contiguous_params: bool = False):
        if amsgrad:
            raise RuntimeError("LAMB does not support the AMSGrad variant")
        check_nonnegative(**{"learning rate": lr, "epsilon": eps, "weight_decay": weight_decay})
        _check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, adam_w_mode=adam_w_mode,
                                      do_bias_correction=do_bias_correction,
                                      contiguous_params=contiguous_params))

    def _attrs(self, group: dict) -> dict:
        b1, b2 = group["betas"]
        return {"beta1": float(b1), "beta2": float(b2), "eps": float(group["eps"]),
                "weight_decay": float(group["weight_decay"]),
                "adam_w_mode": bool(group["adam_w_mode"]),
                "bias_correction": bool(group["do_bias_correction"])}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        _moments(state, param)
        self._apply_update(_LAMB, [param, grad, lr, state["step"], state["exp_avg"],
                                   state["exp_avg_sq"]], attrs)
