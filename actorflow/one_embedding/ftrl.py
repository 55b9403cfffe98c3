"""``flow.one_embedding.Ftrl``: OneFlow's FTRL optimizer (its math is the ``ftrl_update`` op,
``actorflow/ops/optim_ftrl.py``); it trains dense parameters and one_embedding rows alike."""
from __future__ import annotations

from actorflow.ops import registry
from actorflow.optim.optimizer import Optimizer, zeros_state
from actorflow.tensor import Tensor

_FTRL = registry.get("ftrl_update")


class Ftrl(Optimizer):
    """FTRL: per element an accumulator of squared gradients (starting at
    ``initial_accumulator_value``) and ``z`` (starting at 0); see ``ops/optim_ftrl.py`` for
    the update. ``lr_power`` is the accumulator's exponent, ``lambda1`` / ``lambda2`` the L1 /
    L2 strengths, ``weight_decay`` an L2 term added to the gradient."""

    def __init__(self, params, lr: float = 0.001, weight_decay: float = 0.0,
                 lr_power: float = -0.5, initial_accumulator_value: float = 0.1,
                 lambda1: float = 0.0, lambda2: float = 0.0, beta: float = 0.0):
        if lr <= 0.0:
            raise ValueError(f"Invalid learning rate: {lr} (FTRL divides by it)")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if initial_accumulator_value <= 0.0 and lr_power < 0:
            raise ValueError(f"Invalid initial_accumulator_value: {initial_accumulator_value} "
                             f"(a negative lr_power needs it > 0)")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, lr_power=lr_power,
                                      initial_accumulator_value=initial_accumulator_value,
                                      lambda1=lambda1, lambda2=lambda2, beta=beta))

    def _attrs(self, group: dict) -> dict:
        return {k: float(group[k]) for k in ("weight_decay", "lr_power", "lambda1", "lambda2",
                                             "beta")}

    def _update(self, param: Tensor, grad: Tensor, lr: Tensor, attrs: dict, group: dict) -> None:
        state = self.state[param]
        if "accumulator_value" not in state:
            state["accumulator_value"] = zeros_state(param,
                                                     float(group["initial_accumulator_value"]))
            state["z"] = zeros_state(param)
        self._apply_update(_FTRL, [param, grad, lr, state["accumulator_value"], state["z"]],
                           attrs)
